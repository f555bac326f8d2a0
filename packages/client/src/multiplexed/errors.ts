// What an ask of the provider's on the multiplexed connection can end with, whichever family asked.
import { DecodeError } from "@diverge/codec";

/** A JSON-RPC error object as the container's MCP server sent it. */
export interface ErrorData {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

export type ContainerErrorDetail =
  /** The proxy finished the scope or channel with nothing before the finish. */
  | { readonly variant: "NotServed"; readonly what: string }
  /** The begin or the secrets feed was refused; `error` is the refusal's JSON. */
  | { readonly variant: "Refused"; readonly what: string; readonly error: unknown }
  /** The container's MCP server answered with an error. */
  | { readonly variant: "Mcp"; readonly what: string; readonly error: ErrorData }
  /**
   * The connection ended, or the proxy ended the tools::begin scope (it does so when it is ending),
   * before the answer finished or before the ask was made.
   */
  | { readonly variant: "Lost"; readonly what: string }
  /** The answer's bytes did not decode. */
  | { readonly variant: "Unreadable"; readonly what: string; readonly reason: string }
  /** An ask that needs `Begun` was made before it. */
  | { readonly variant: "NotBegun"; readonly what: string }
  /** No answer within `timeoutMs`; `waitingFor` says what was awaited (and why it may be held). */
  | { readonly variant: "TimedOut"; readonly what: string; readonly waitingFor: string; readonly timeoutMs: number }
  /** The caller's signal aborted the wait. */
  | { readonly variant: "Aborted"; readonly what: string; readonly waitingFor: string; readonly reason: unknown }
  /** The proxy refused `/` with 409: it has had its one provider connection (a proxy takes one in its life). */
  | { readonly variant: "AlreadyConnected"; readonly what: string; readonly url: string }
  /**
   * The ask's message would be larger than the proxy's message limit (its --max-message-bytes): it was
   * not sent, since the proxy ends the whole connection (or the path) on a message over its limit.
   */
  | { readonly variant: "TooLarge"; readonly what: string; readonly bytes: number; readonly limit: number }
  /** The proxy could not be reached, or refused the upgrade for another reason. */
  | { readonly variant: "Unreachable"; readonly what: string; readonly url: string; readonly status: number | undefined; readonly reason: string };

export class ContainerError extends Error {
  override readonly name = "ContainerError";
  constructor(readonly detail: ContainerErrorDetail) {
    super(describe(detail));
  }
  get variant(): ContainerErrorDetail["variant"] {
    return this.detail.variant;
  }
}

function describe(detail: ContainerErrorDetail): string {
  switch (detail.variant) {
    case "NotServed":
      return `${detail.what}: not served`;
    case "Refused":
      return `${detail.what}: refused: ${JSON.stringify(detail.error)}`;
    case "Mcp":
      return `${detail.what}: MCP error ${detail.error.code}: ${detail.error.message}`;
    case "Lost":
      return `${detail.what}: the connection (or the proxy's tools::begin scope) ended before the answer`;
    case "Unreadable":
      return `${detail.what}: unreadable answer: ${detail.reason}`;
    case "NotBegun":
      return `${detail.what}: the container has not begun (call beginTools first)`;
    case "TimedOut":
      return `${detail.what}: no answer within ${detail.timeoutMs} ms; waiting for ${detail.waitingFor}`;
    case "Aborted":
      return `${detail.what}: aborted while waiting for ${detail.waitingFor}${detail.reason instanceof Error ? `: ${detail.reason.message}` : ""}`;
    case "AlreadyConnected":
      return `${detail.what}: the proxy's one multiplexed connection (${detail.url}, HTTP 409) is already used, by an earlier command even one whose begin was refused, and a proxy takes one connection on / in its life: restart the proxy (its container), or hold the connection with \`diverge connect\``;
    case "TooLarge":
      return `${detail.what}: the message is ${detail.bytes} bytes on the wire, larger than the proxy's message limit of ${detail.limit} bytes (its --max-message-bytes); it was not sent`;
    case "Unreachable":
      return `${detail.what}: could not open ${detail.url}${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
  }
}

/** A frame's header on the wire: its tag byte and two u32 ids (scope, channel). */
export const FRAME_HEADER_BYTES = 9;

/**
 * Refuses, unsent, a request whose frame would be over the proxy's message limit: the proxy ends the
 * whole connection on a message over its limit (close 1009), which would fail every other exchange
 * with it. Throws ContainerError `TooLarge`.
 */
export function refuseOversized(what: string, payload: Uint8Array, limit: number): void {
  const bytes = payload.length + FRAME_HEADER_BYTES;
  if (bytes > limit) throw new ContainerError({ variant: "TooLarge", what, bytes, limit });
}

/** The typed failures of a bounded wait (`waiting.ts`) for an ask named `what`. */
export function failures(what: string, waitingFor: () => string) {
  return {
    timedOut: (timeoutMs: number) => new ContainerError({ variant: "TimedOut", what, waitingFor: waitingFor(), timeoutMs }),
    aborted: (reason: unknown) => new ContainerError({ variant: "Aborted", what, waitingFor: waitingFor(), reason }),
  };
}

/** What an answer that did not decode is reported as. */
export function unreadable(what: string, error: unknown): ContainerError {
  if (error instanceof ContainerError) return error;
  if (error instanceof DecodeError) return new ContainerError({ variant: "Unreadable", what, reason: error.message });
  return new ContainerError({ variant: "Unreadable", what, reason: error instanceof Error ? error.message : String(error) });
}
