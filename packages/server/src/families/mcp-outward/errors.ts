// Why an MCP exchange the proxy asked ended without a result. Every ending is one of these variants,
// so a caller (and the program-facing MCP server) can map each to exactly one MCP outcome.
import type { ErrorData, McpAnswerError } from "@diverge/codec";

export type McpExchangeErrorDetail =
  | {
      /** The provider answered with an MCP error (the `[1]` frame); code, message and data as sent. */
      readonly variant: "McpError";
      readonly error: ErrorData;
    }
  | {
      /** The answer path was closed cleanly with no message: the provider did not serve the ask. */
      readonly variant: "NotServed";
      /** The exchange, by its MCP method (`tools/list`, `tools/call`, …). */
      readonly what: string;
      readonly channel: number;
    }
  | {
      /** The provider's answer did not decode. Not asked again: the same provider would send the same bytes. */
      readonly variant: "UnreadableAnswer";
      /** The exchange, by its MCP method (`tools/list`, `tools/call`, …). */
      readonly what: string;
      readonly channel: number;
      readonly source: McpAnswerError;
    }
  | {
      /** The provider's answer was larger than the proxy's message limit, so it could not be read. */
      readonly variant: "AnswerTooLarge";
      /** The exchange, by its MCP method (`tools/list`, `tools/call`, …). */
      readonly what: string;
      readonly channel: number;
      readonly limit: number;
    }
  | {
      /** The ask itself would be larger than the proxy's message limit, so it was never sent. */
      readonly variant: "AskTooLarge";
      readonly bytes: number;
      readonly limit: number;
    }
  | {
      /** Too many exchanges were waiting for their answers already; this one was never asked. */
      readonly variant: "TooManyPending";
      readonly limit: number;
    }
  | {
      /** The proxy closed before the exchange was answered. */
      readonly variant: "ProxyClosed";
    }
  | {
      /** The provider's connection on `/` ended before it answered on the begin-scope channel; begin-scope channels are never asked again. */
      readonly variant: "Lost";
    }
  | {
      /** No answer within the caller's `timeoutMs`; `heldBySecretsGate`: the gate held it all that time (never asked). */
      readonly variant: "TimedOut";
      readonly what: string;
      readonly timeoutMs: number;
      readonly heldBySecretsGate: boolean;
    }
  | {
      /** The caller's `signal` gave the exchange up before it was answered; `reason` is the signal's. */
      readonly variant: "Aborted";
      readonly what: string;
      readonly reason: unknown;
    };

function describe(detail: McpExchangeErrorDetail): string {
  switch (detail.variant) {
    case "McpError":
      return detail.error.message;
    case "NotServed":
      return `${detail.what}: the provider did not serve the exchange (channel ${detail.channel})`;
    case "UnreadableAnswer":
      return `${detail.what}: the provider's answer (channel ${detail.channel}) could not be read: ${detail.source.message}`;
    case "AnswerTooLarge":
      return `${detail.what}: the provider's answer (channel ${detail.channel}) is larger than ${detail.limit} bytes`;
    case "AskTooLarge":
      return `the ask is ${detail.bytes} bytes, larger than the limit of ${detail.limit}`;
    case "TooManyPending":
      return `${detail.limit} exchanges are already waiting for their answers; this one was not asked`;
    case "ProxyClosed":
      return "the proxy closed before the exchange was answered";
    case "Lost":
      return "the provider's connection ended before it answered on the begin scope; the exchange is not asked again";
    case "TimedOut":
      return detail.heldBySecretsGate
        ? `${detail.what}: not asked within ${detail.timeoutMs} ms: the proxy's secrets gate held it all that time (the program has not taken its secrets; start the proxy with --no-secrets-gate if it declares none)`
        : `${detail.what}: the provider did not answer within ${detail.timeoutMs} ms`;
    case "Aborted":
      return `${detail.what}: given up by the caller before the provider answered${detail.reason instanceof Error && detail.reason.name !== "AbortError" ? ` (${detail.reason.message})` : typeof detail.reason === "string" ? ` (${detail.reason})` : ""}`;
  }
}

export class McpExchangeError extends Error {
  override readonly name = "McpExchangeError";
  constructor(readonly detail: McpExchangeErrorDetail) {
    super(describe(detail), detail.variant === "UnreadableAnswer" ? { cause: detail.source } : undefined);
  }

  get variant(): McpExchangeErrorDetail["variant"] {
    return this.detail.variant;
  }
}
