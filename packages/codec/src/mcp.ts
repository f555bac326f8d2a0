// @diverge/codec/mcp: checks the JSON of MCP-typed payloads with the MCP TypeScript SDK's own
// schemas. A separate entry point, so the codec's core stays free of runtime dependencies.
import type { TypeCheck } from "./runtime/options.js";
import { mcpSchemas, type McpSchema } from "./gen/mcp-schemas.js";

/**
 * A {@link TypeCheck} for every MCP type the codec's frames name. Pass it as `{ check: checkMcp }`
 * to any decoder. The reason names the path and what was expected, never a value of the input.
 */
export const checkMcp: TypeCheck = (typeName, value) => {
  const schema = (mcpSchemas as Readonly<Record<string, McpSchema | undefined>>)[typeName];
  if (!schema) return `no MCP type is named ${typeName}`;
  const result = schema.safeParse(value);
  if (result.success) return undefined;
  const issue = result.error.issues[0];
  if (!issue) return `not a ${typeName}`;
  const path = issue.path.map(String).join(".");
  // zod's wording states expected and received types; it does not quote the input's values.
  return `not a ${typeName}: ${issue.message.replace(/\s+/g, " ")}${path ? ` at ${path}` : ""}`;
};

/** The MCP types the checks cover, by the names the spec uses. */
export const mcpTypeNames = Object.keys(mcpSchemas) as readonly (keyof typeof mcpSchemas)[];
