// How a caller tunes decoding. The codec's core has no dependencies; the MCP type check is plugged
// in from `@diverge/codec/mcp`, which uses the MCP SDK's own schemas.

/**
 * Checks a parsed JSON payload against the named MCP type. Returns `undefined` when the value is of
 * the type, else a short reason that quotes no part of the value.
 */
export type TypeCheck = (typeName: string, value: unknown) => string | undefined;

export interface DecodeOptions {
  /** Check JSON payloads named by an MCP type. Without it, any well-formed JSON is accepted. */
  readonly check?: TypeCheck;
}
