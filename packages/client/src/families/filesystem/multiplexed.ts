// filesystem::tree, ::read and ::write from the provider's side of the multiplexed connection:
// one scope each; the tree's stop is a channel the provider opens, the write's content a channel
// the proxy opens and the provider answers.
import {
  decodeReadResponse,
  decodeTreeResponse,
  decodeWriteResponse,
  encodeContainerProxyRequest,
  encodeWriteContent,
  type FiletreeFrame,
} from "@diverge/codec";
import type { FrameSocket, Responder } from "@diverge/multiplexer";
import { FilesystemError } from "./errors.js";
import { byteStream, piecesOf, PushQueue, type WriteSource } from "./queue.js";

/** What the filesystem exchanges need of a multiplexed connection. */
export interface FilesystemHost {
  readonly frames: FrameSocket;
  /** Hands the channels the proxy opens on `scope` to `handler` until the returned function is called. */
  routeScopeChannels(scope: number, handler: (responder: Responder, payload: Uint8Array) => void): () => void;
  /** Counts the reads' flow control on this connection, when given. */
  readonly readFlow?: ReadFlowStats;
}

/** How the reads of one multiplexed connection held it (the counters only grow, except the `…Now` ones). */
export interface ReadFlowStats {
  /** Bytes the reads' streams hold now for readers that have not taken them. */
  heldNow: number;
  /** The most bytes one read's stream held at once. */
  maxHeld: number;
  /** Times a read paused reading the connection because its reader lagged past READ_HIGH_WATER. */
  pausedConnection: number;
  /** Reads holding the connection paused now. */
  holdingNow: number;
  /** Reads stopped because their reader took nothing for `stallMs` while holding the connection paused. */
  endedStalled: number;
}

export function emptyReadFlowStats(): ReadFlowStats {
  return { heldNow: 0, maxHeld: 0, pausedConnection: 0, holdingNow: 0, endedStalled: 0 };
}

/** Default of `ReadOptions.stallMs`, as the proxy's `pairStallMs`. */
export const DEFAULT_READ_STALL_MS = 10_000;

export interface TreeOptions {
  /** Paths (component arrays from the root) left out; `/proc`, `/sys`, `/dev` always are. */
  readonly ignore?: readonly (readonly string[])[];
  /** Frames held for a reader that does not pull; past it the tree is stopped with `Overflow`. Default 10000. */
  readonly maxQueued?: number;
  /** Aborting stops the tree (as `stop()`). */
  readonly signal?: AbortSignal;
}

/** The frames of a tree, first a Snapshot; ends after `stop()` (or a `break`), throws FilesystemError otherwise. */
export interface TreeStream extends AsyncIterable<FiletreeFrame> {
  /** Asks the proxy to stop; the iteration ends once it has. */
  stop(): void;
}

export interface TransferOptions {
  /** Aborting gives the exchange up (a write is then abandoned and leaves nothing). */
  readonly signal?: AbortSignal;
}

export interface ReadOptions extends TransferOptions {
  /**
   * How long the reader may take nothing while this read holds the connection paused (every other
   * exchange on it waits) before the read is stopped and the stream fails with `Stalled`. Default 10 s.
   */
  readonly stallMs?: number;
}

/** Bytes queued on the socket past which a write waits before sending more content. */
const LOW_WATER = 4 * 1024 * 1024;

const lostOr = (host: FilesystemHost, what: string) => (host.frames.mux.ended ? new FilesystemError({ variant: "Lost", what }) : undefined);

export function treeOn(host: FilesystemHost, options: TreeOptions = {}): TreeStream {
  const what = "filesystem::tree";
  const limit = options.maxQueued ?? 10_000;
  let stopped = false;
  let scope: number | undefined;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    options.signal?.removeEventListener("abort", stop);
    // The stop: a channel with an empty payload; the proxy answers it only by finishing the scope.
    if (scope !== undefined && !host.frames.mux.ended) {
      try {
        host.frames.mux.openChannel(scope, new Uint8Array(0), { response: () => {}, finish: () => {} });
      } catch {
        // The scope already ended.
      }
    }
  };
  const queue = new PushQueue<FiletreeFrame>(limit, () => new FilesystemError({ variant: "Overflow", what, limit }), stop);
  const lost = lostOr(host, what);
  if (lost) queue.fail(lost);
  else {
    let any = false;
    scope = host.frames.mux.openScope(encodeContainerProxyRequest({ variant: "FilesystemTree", request: { ignore: options.ignore ?? [] } }), {
      response: (payload) => {
        any = true;
        let answer;
        try {
          answer = decodeTreeResponse(payload);
        } catch (problem) {
          queue.fail(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
          return stop();
        }
        if (answer.variant === "Frame") queue.push(answer.frame);
        else queue.fail(new FilesystemError({ variant: "Failed", what, error: answer.error }));
      },
      finish: () => (any || stopped ? queue.end() : queue.fail(new FilesystemError({ variant: "NotServed", what }))),
      lost: () => queue.fail(new FilesystemError({ variant: "Lost", what })),
    }).scope;
    if (options.signal?.aborted) stop();
    else options.signal?.addEventListener("abort", stop, { once: true });
  }
  return { stop, [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator]() };
}

export function readOn(host: FilesystemHost, path: readonly string[], options: ReadOptions = {}): ReadableStream<Uint8Array> {
  const what = "filesystem::read";
  const stallMs = options.stallMs ?? DEFAULT_READ_STALL_MS;
  const stats = host.readFlow ?? emptyReadFlowStats();
  let fail: ((problem: unknown) => void) | undefined;
  let stallTimer: ReturnType<typeof setTimeout> | undefined;
  let held = 0;
  let given = false;
  let scope: number | undefined;
  let over = false;
  /**
   * The reader gave up: the pieces still coming are dropped, and the proxy is asked to stop with a
   * channel on the read scope, empty like the tree's stop. Our proxy then closes the file and
   * finishes the scope; one that ignores the channel (fs-fuse.md §2's recommendation) reads on.
   */
  const giveUp = () => {
    if (given) return;
    given = true;
    if (scope === undefined || over || host.frames.mux.ended) return;
    try {
      host.frames.mux.openChannel(scope, new Uint8Array(0), { response: () => {}, finish: () => {} });
    } catch {
      // The scope already ended.
    }
  };
  return byteStream(
    (sink) => {
      const lost = lostOr(host, what);
      if (lost) return sink.fail(lost);
      fail = sink.fail;
      if (options.signal?.aborted) {
        given = true;
        return sink.fail(options.signal.reason);
      }
      let any = false;
      const onAbort = () => {
        giveUp();
        sink.fail(options.signal!.reason);
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      scope = host.frames.mux.openScope(encodeContainerProxyRequest({ variant: "FilesystemRead", request: { path: [...path] } }), {
        response: (payload) => {
          any = true;
          if (given) return;
          let answer;
          try {
            answer = decodeReadResponse(payload);
          } catch (problem) {
            return sink.fail(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
          }
          // The payload is a view into the frame: copied before it is handed on.
          if (answer.variant === "Piece") sink.piece(answer.piece.slice());
          else sink.fail(new FilesystemError({ variant: "Failed", what, error: answer.error }));
        },
        finish: () => {
          over = true;
          options.signal?.removeEventListener("abort", onAbort);
          if (any || given) sink.end();
          else sink.fail(new FilesystemError({ variant: "NotServed", what }));
        },
        lost: () => {
          over = true;
          options.signal?.removeEventListener("abort", onAbort);
          sink.fail(new FilesystemError({ variant: "Lost", what }));
        },
      }).scope;
    },
    giveUp,
    {
      // A reader slower than the wire: the stream holds up to READ_HIGH_WATER for it, then pauses
      // reading the whole connection (the scope has no flow control of its own) until the reader has
      // taken most of it. A reader that takes nothing for `stallMs` meanwhile (or a stream dropped
      // unread) would freeze every exchange: the read is stopped instead and the connection reads on.
      pause: () => {
        const resume = host.frames.pauseIncoming();
        stats.pausedConnection++;
        stats.holdingNow++;
        const timer = setTimeout(() => {
          stallTimer = undefined;
          stats.endedStalled++;
          giveUp();
          fail?.(new FilesystemError({ variant: "Stalled", what, stallMs }));
        }, stallMs);
        timer.unref?.();
        stallTimer = timer;
        return () => {
          clearTimeout(timer);
          if (stallTimer === timer) stallTimer = undefined;
          stats.holdingNow--;
          resume();
        };
      },
      queued: (bytes) => {
        // The reader took some: the stall timer starts over.
        if (bytes < held) stallTimer?.refresh();
        stats.heldNow += bytes - held;
        held = bytes;
        if (bytes > stats.maxHeld) stats.maxHeld = bytes;
      },
    },
  );
}

export function writeOn(host: FilesystemHost, path: readonly string[], content: WriteSource, options: TransferOptions = {}): Promise<void> {
  const what = "filesystem::write";
  return new Promise<void>((resolve, reject) => {
    const lost = lostOr(host, what);
    if (lost) return reject(lost);
    let answer: Uint8Array | undefined;
    let unroute = () => {};
    let contentChannel: Responder | undefined;
    const onAbort = () => {
      // Abandoned: the content ends in an error, so the proxy removes its temporary.
      contentChannel?.respond(encodeWriteContent({ variant: "Failure", error: { kind: "content", error: "the provider abandoned the write" } }));
      contentChannel?.finish();
    };
    const settle = (problem?: unknown) => {
      unroute();
      options.signal?.removeEventListener("abort", onAbort);
      if (problem === undefined) resolve();
      else reject(problem);
    };
    const { scope } = host.frames.mux.openScope(encodeContainerProxyRequest({ variant: "FilesystemWrite", request: { path: [...path] } }), {
      response: (payload) => {
        answer ??= payload.slice();
      },
      finish: () => {
        if (!answer) return settle(new FilesystemError({ variant: "NotServed", what }));
        let decoded;
        try {
          decoded = decodeWriteResponse(answer);
        } catch (problem) {
          return settle(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
        }
        if (decoded.variant === "Written") settle();
        else settle(options.signal?.aborted ? options.signal.reason : new FilesystemError({ variant: "Failed", what, error: decoded.error }));
      },
      lost: () => settle(new FilesystemError({ variant: "Lost", what })),
    });
    unroute = host.routeScopeChannels(scope, (responder) => {
      // Exactly one content channel; any other channel on the scope is answered by a bare finish.
      if (contentChannel) return responder.finish();
      contentChannel = responder;
      void sendContent(host, responder, content, options.signal);
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A content Piece's bytes before the piece itself: the encoding of an empty piece. */
const PIECE_HEAD = encodeWriteContent({ variant: "Piece", piece: new Uint8Array(0) });

async function sendContent(host: FilesystemHost, responder: Responder, content: WriteSource, signal: AbortSignal | undefined): Promise<void> {
  try {
    for await (const piece of piecesOf(content)) {
      if (responder.finished || signal?.aborted) return;
      // The piece is the content frame's last field: its tag (the encoding of an empty piece) and the
      // piece go into the connection's frame in one copy.
      if (responder.respondParts) responder.respondParts(PIECE_HEAD, piece);
      else responder.respond(encodeWriteContent({ variant: "Piece", piece }));
      await host.frames.drained(LOW_WATER);
    }
  } catch (problem) {
    // The content's own failure: the proxy abandons the write and answers with this value.
    if (!responder.finished) responder.respond(encodeWriteContent({ variant: "Failure", error: { kind: "content", error: problem instanceof Error ? problem.message : String(problem) } }));
  }
  responder.finish();
}
