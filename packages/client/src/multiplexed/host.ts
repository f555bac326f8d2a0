// What a family's multiplexed adapter may use of the connection (`MultiplexedConnection` is one):
// the typed asks of the begin scope, the bounded ask of one channel, the begin scope to open on, and
// the connection's events. Adapters take this shape, never the class, so no family imports it.
import type { ProviderAsks } from "../gen/exchanges.js";
import type { ChannelOutcome } from "../exchanges/engine.js";
import type { RequestOptions } from "../waiting.js";

/** What happened on the connection besides the answers to the provider's own asks. */
export type MultiplexedConnectionEvent =
  /** The proxy announced a program's database or daemon connection. */
  | { readonly type: "announced"; readonly kind: "postgres" | "daemon"; readonly id: number }
  /** An announced connection was declined (no handler, no `database`, or the handler declined it). */
  | { readonly type: "declined"; readonly kind: "postgres" | "daemon"; readonly id: number; readonly reason: string }
  /** A pair failed: the database could not be reached, a handler threw or rejected. Never thrown. */
  | { readonly type: "pairFailed"; readonly kind: "postgres" | "daemon"; readonly id: number; readonly error: Error }
  /**
   * The first MCP exchange asked before the secrets were fed (reported once). A proxy with the secrets gate (the
   * default) holds it until `feedSecrets` resolves; `feedSecrets({})` opens it for a program that
   * declares none.
   */
  | { readonly type: "heldForSecrets"; readonly what: string }
  /** A `notifications()` iterator whose loop did not keep pace lost its oldest notifications. */
  | { readonly type: "notificationsDropped"; readonly dropped: number }
  /**
   * An answer on a proxy-opened channel was larger than the proxy's message limit (`maxMessageBytes`),
   * so it was not sent: the proxy would close the whole connection on it (close 1009). The channel is
   * finished with what was sent before it; with nothing, that is a bare finish (not served).
   */
  | { readonly type: "answerNotSent"; readonly channel: number; readonly reason: string }
  /** The WebSocket closed. */
  | { readonly type: "ended"; readonly code: number };

export interface ConnectionHost {
  /** The generated typed asks of the channels the provider opens on the begin scope. */
  readonly asks: ProviderAsks;
  emit(event: MultiplexedConnectionEvent): void;
  /** Asks one channel of the begin scope and reads its outcome (see `MultiplexedConnection.askChannel`). */
  askChannel<A>(what: string, ask: () => Promise<ChannelOutcome<A>>, options?: RequestOptions, waitingFor?: () => string): Promise<A>;
  /** The begin scope to open a channel on. Throws ContainerError (`Lost`, `NotBegun`) when there is none. */
  channelScope(what: string): number;
  /** Reports the first MCP exchange asked before the secrets were fed. */
  noteMcpAsk(what: string): void;
  /** What an MCP exchange waits for, with the secrets gate named while the secrets are not fed. */
  mcpWaitingFor(what: string): string;
}
