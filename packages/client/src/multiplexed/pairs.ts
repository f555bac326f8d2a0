// The pair engine of the multiplexed connection: a connection the proxy announces on a channel of its
// own (a program's database or daemon connection), the provider's half opened on the begin scope with
// the same id, raw bytes both ways, a bare finish for an unknown id or a decline (multiplexed.md
// §9.1, §9.3, §10.1, §10.3). Which tags announce a pair, and what a half's channel request is, the
// pair families say (families/index.ts); nothing here names one.
import type { ToolsBeginChannelRequest, ToolsBeginServerChannelRequest } from "@diverge/codec";
import type { FrameSocket, Responder } from "@diverge/multiplexer";
import { ContainerError } from "./errors.js";
import type { MultiplexedConnectionEvent } from "./host.js";

/** The kinds of connection a proxy announces (the pair families' kinds). */
export type PairKind = Extract<MultiplexedConnectionEvent, { readonly type: "announced" }>["kind"];

/** A connection the proxy announced: a program's database driver or daemon connection. */
export interface AnnouncedConnection {
  readonly kind: PairKind;
  /** The id the proxy minted; the provider's half quotes it. */
  readonly id: number;
  /**
   * Opens the provider's half. `data` receives what the program sent (driver bytes, or one daemon
   * client frame per call); `end` is called once that half finishes (`served` false: the proxy did not
   * know the id) or the connection ends. A handler that throws ends the pair (reported as `pairFailed`).
   */
  accept(handlers: { data(bytes: Uint8Array): void; end(served: boolean): void }): PairHalf;
  /** Declines the connection: the proxy closes the program's socket. */
  decline(): void;
}

/** The provider's end of an accepted pair. */
export interface PairHalf {
  /** Sends bytes to the program (what the database says, or one daemon server frame). */
  send(bytes: Uint8Array): void;
  /** Ends the proxy's half: the database or daemon closed the connection. */
  end(): void;
  /** Bytes waiting in the connection's send buffer, for backpressure. */
  readonly bufferedAmount: number;
  drained(lowWater: number): Promise<void>;
  /** Stops reading the connection until the returned function is called. */
  pauseIncoming(): () => void;
}

/** A family whose connections the proxy announces: the tag it announces on, and who answers. */
export interface PairFamily<O = never> {
  readonly kind: PairKind;
  /** The variant of the proxy-opened channel request that announces one (it carries `connection_id`). */
  readonly announcedBy: ToolsBeginServerChannelRequest["variant"];
  /** The channel request of the provider's half for the connection `id`. */
  half(id: number): ToolsBeginChannelRequest;
  /** Who answers each announced connection, from the connection's options; undefined declines every one. */
  handler(options: O): ((connection: AnnouncedConnection) => unknown) | undefined;
  /** Why a connection was declined when there is no handler. */
  readonly noHandler: string;
}

/** What the pair engine needs of the connection. */
export interface PairHost {
  readonly frames: FrameSocket;
  emit(event: MultiplexedConnectionEvent): void;
  /** Opens a channel of the provider's on the begin scope. Throws ContainerError when it cannot. */
  openChannel(what: string, request: ToolsBeginChannelRequest, handlers: { response(payload: Uint8Array): void; finish(served: boolean): void; lost(): void }): void;
}

/** Takes the connection `id` the proxy announced on `proxyHalf` to the family's handler, or declines it. */
export function announcePair<O>(host: PairHost, family: PairFamily<O>, options: O, id: number, proxyHalf: Responder): void {
  const kind = family.kind;
  const announced = announcedConnection(host, family, id, proxyHalf);
  host.emit({ type: "announced", kind, id });
  const handler = family.handler(options);
  if (!handler) {
    announced.decline();
    host.emit({ type: "declined", kind, id, reason: family.noHandler });
    return;
  }
  const failed = (error: unknown) => {
    announced.decline();
    announced.failed(error);
  };
  try {
    const outcome = handler(announced);
    if (outcome && typeof (outcome as PromiseLike<unknown>).then === "function") (outcome as PromiseLike<unknown>).then(undefined, failed);
  } catch (error) {
    failed(error);
  }
}

function announcedConnection<O>(connection: PairHost, family: PairFamily<O>, id: number, proxyHalf: Responder): AnnouncedConnection & { failed(error: unknown): void } {
  const kind = family.kind;
  let decided = false;
  let declined = false;
  let reported = false;
  let half: { end(): void } | undefined;
  const failed = (error: unknown) => {
    if (reported) return;
    reported = true;
    connection.emit({ type: "pairFailed", kind, id, error: error instanceof Error ? error : new Error(String(error)) });
  };
  return {
    kind,
    id,
    failed,
    decline() {
      if (!decided) {
        decided = true;
        declined = true;
        proxyHalf.finish();
        return;
      }
      // After an accept, declining ends the proxy's half.
      if (!declined) half?.end();
    },
    accept(handlers) {
      if (decided) throw new Error(`${kind} connection ${id} was already accepted or declined`);
      decided = true;
      const tag = family.half(id);
      let ended = false;
      const end = (served: boolean) => {
        if (ended) return;
        ended = true;
        try {
          handlers.end(served);
        } catch (error) {
          failed(error);
        }
      };
      try {
        connection.openChannel(`${kind} connection ${id}`, tag, {
          response: (bytes) => {
            if (ended) return;
            try {
              handlers.data(bytes);
            } catch (error) {
              failed(error);
              proxyHalf.finish();
              end(true);
            }
          },
          finish: (served) => end(served),
          lost: () => end(false),
        });
      } catch (error) {
        queueMicrotask(() => end(false));
        if (!(error instanceof ContainerError)) failed(error);
      }
      half = {
        end: () => proxyHalf.finish(),
      };
      return {
        send: (bytes) => proxyHalf.respond(bytes),
        end: () => proxyHalf.finish(),
        get bufferedAmount() {
          return connection.frames.bufferedAmount;
        },
        drained: (lowWater) => connection.frames.drained(lowWater),
        pauseIncoming: () => connection.frames.pauseIncoming(),
      };
    },
  };
}
