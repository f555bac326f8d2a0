// What can go wrong on the provider side of the many-paths transport. None of these ends the
// connection to the proxy: each is reported as an event and the provider keeps answering.
import type { RequestsAskError } from "@diverge/codec";

export type ProviderErrorDetail =
  | {
      /** An ask on `/requests` did not decode. When its channel and kind could be read, its path was opened and closed with no message. */
      readonly variant: "MalformedAsk";
      readonly source: RequestsAskError;
      readonly channel: number | undefined;
      readonly kind: number | undefined;
      /** The answer path declined, when the kind names one. */
      readonly path: string | undefined;
    }
  | {
      /** `/requests` could not be opened (409: another provider holds it); it is dialled again after a backoff. */
      readonly variant: "RequestsUnavailable";
      readonly status: number | undefined;
      readonly reason: string;
    }
  | {
      /** An answer path could not be opened (404: the proxy forgot the channel; 409: already opened). */
      readonly variant: "PathRefused";
      readonly path: string;
      readonly status: number | undefined;
      readonly reason: string;
    }
  | {
      /** A handler threw; the exchange was answered with an MCP internal error (-32603). */
      readonly variant: "HandlerFailed";
      readonly path: string;
      readonly reason: string;
    }
  | {
      /** `whenConnected()` waited on a connection that `close()` stopped. */
      readonly variant: "Closed";
      readonly waitingFor: string;
    }
  | {
      /** `whenConnected()` waited longer than its `timeoutMs`. */
      readonly variant: "TimedOut";
      readonly waitingFor: string;
      readonly timeoutMs: number;
    }
  | {
      /** `whenConnected()`'s signal aborted the wait. */
      readonly variant: "Aborted";
      readonly waitingFor: string;
      readonly reason: unknown;
    }
  | {
      /** An answer could not be written (its JSON did not serialize); the path was closed with no message. */
      readonly variant: "AnswerUnwritable";
      readonly path: string;
      readonly reason: string;
    };

function describe(detail: ProviderErrorDetail): string {
  switch (detail.variant) {
    case "MalformedAsk":
      return detail.path ? `${detail.source.message}; ${detail.path} closed with no message` : detail.source.message;
    case "RequestsUnavailable":
      return `/requests could not be opened${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
    case "PathRefused":
      return `${detail.path} could not be opened${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
    case "HandlerFailed":
      return `the handler of ${detail.path} failed: ${detail.reason}`;
    case "Closed":
      return `the connection was closed while waiting for ${detail.waitingFor}`;
    case "TimedOut":
      return `nothing within ${detail.timeoutMs} ms while waiting for ${detail.waitingFor}`;
    case "Aborted":
      return `aborted while waiting for ${detail.waitingFor}${detail.reason instanceof Error ? `: ${detail.reason.message}` : ""}`;
    case "AnswerUnwritable":
      return `the answer on ${detail.path} could not be written: ${detail.reason}`;
  }
}

export class ProviderError extends Error {
  override readonly name = "ProviderError";
  constructor(readonly detail: ProviderErrorDetail) {
    super(describe(detail), detail.variant === "MalformedAsk" ? { cause: detail.source } : undefined);
  }

  get variant(): ProviderErrorDetail["variant"] {
    return this.detail.variant;
  }
}
