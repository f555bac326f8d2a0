// The one WebSocket shape the provider side needs: the WHATWG API (what browsers, Deno, Bun and the
// `ws` package all offer), so a caller may bring its own implementation. The default is a `ws`
// WebSocket, opened for `ws:` URLs by the lean handshake of lean-open.ts.
import { binaryOf } from "@diverge/multiplexer";
import { defaultWebSocketFor } from "./lean-open.js";
import { FrameBatch, SMALL_FRAME_MAX_BYTES } from "./small-frames.js";

/** The part of the WHATWG WebSocket API the provider side uses. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  /** Bytes queued by `send` not yet written out (WHATWG). */
  readonly bufferedAmount?: number;
  /** WHATWG `send` takes a `BufferSource`, whose views are over an `ArrayBuffer` (never a `SharedArrayBuffer`). */
  send(data: Uint8Array<ArrayBuffer>): void;
  close(code?: number, reason?: string): void;
  /** Ends the connection without a Close frame, where the implementation can (`ws` can). */
  terminate?(): void;
  addEventListener(type: "open" | "message" | "close" | "error", listener: (event: never) => void): void;
  /** `ws` only: Node-style listeners (a message as `(data, isBinary)`, no event object per message). */
  on?(type: "message", listener: (data: unknown, isBinary: boolean) => void): unknown;
  /** `ws` only: stops reading the connection (TCP backpressure reaches the sender) until `resume()`. */
  pause?(): void;
  resume?(): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** The byte stream under a `ws` WebSocket (Node's `net.Socket`): writes it can hold back and let go in one. */
interface RawStream {
  cork(): void;
  uncork(): void;
  write(chunk: Uint8Array): boolean;
  readonly writable: boolean;
  prependListener(event: "data", listener: () => void): void;
}

/**
 * The most bytes held corked in one turn: past it they go at once. Corked bytes count in
 * `bufferedAmount`, so a bound keeps a burst from reading as a path that does not drain.
 */
const MAX_CORKED_BYTES = 64 * 1024;

/**
 * The default: a `ws` WebSocket. For `ws:` URLs it is opened by the lean handshake of lean-open.ts
 * (an answer's connection costs half the CPU `ws`'s own client spends opening it).
 */
export const defaultWebSocket = function DefaultWebSocket(url: string) {
  return defaultWebSocketFor(url);
} as unknown as WebSocketConstructor;

/** How a connection ended: `clean` when a Close frame arrived (any code), else abrupt. */
export interface SocketEnding {
  readonly clean: boolean;
  readonly code: number;
}

/** Why a connection could not be opened. `status` is the HTTP refusal when the implementation says it. */
export interface OpenFailure {
  readonly status: number | undefined;
  readonly message: string;
}

/** An open connection: binary messages in, bytes out, and the ending. Text messages are dropped. */
export interface OpenSocket {
  send(bytes: Uint8Array): void;
  /** Closes cleanly (a Close frame with no status); `ended` resolves when the close completes. */
  close(): void;
  /** Ends the connection abruptly where the implementation allows it, else closes cleanly. */
  terminate(): void;
  onMessage(listener: (bytes: Uint8Array) => void): void;
  readonly ended: Promise<SocketEnding>;
  readonly isOpen: boolean;
  /** Bytes queued by `send` not yet written out. */
  readonly bufferedAmount: number;
  /**
   * Stops reading the connection until every pause has been resumed (the returned function), so
   * TCP backpressure reaches the proxy. A no-op where the implementation cannot pause (`ws` can).
   */
  pauseIncoming(): () => void;
}

const OPEN = 1;

/** Dials `url`; resolves when the connection is open, rejects with an OpenFailure when it is not. */
export function openSocket(Impl: WebSocketConstructor, url: string): Promise<OpenSocket> {
  return new Promise((resolve, reject) => {
    let socket: WebSocketLike;
    try {
      socket = new Impl(url);
    } catch (problem) {
      reject({ status: undefined, message: problem instanceof Error ? problem.message : String(problem) } satisfies OpenFailure);
      return;
    }
    // `ws` hands a message's own Buffer over as it is; its "arraybuffer" copies each into a new ArrayBuffer.
    // A WHATWG WebSocket ignores a value it does not know, and is then given "arraybuffer".
    socket.binaryType = "nodebuffer";
    if (socket.binaryType !== "nodebuffer") socket.binaryType = "arraybuffer";
    // With `ws`, the upgrade's socket under the WebSocket: the messages sent in one turn of the event
    // loop leave in one write (a command's items: one system call per turn, not per item). Small ones
    // are framed here into one batch (small-frames.ts) once the connection is known to have no
    // extension (so `ws` holds nothing back that they could overtake); others go through `ws`, on the
    // stream corked until the turn ends, the batch written before them.
    let stream: RawStream | undefined;
    (socket as { once?: (event: string, listener: (response: { socket?: RawStream }) => void) => void }).once?.("upgrade", (response) => (stream = response.socket));
    let smallFramesDirect = false;
    const batch = new FrameBatch();
    let turnEnd: ReturnType<typeof setImmediate> | undefined;
    let corked = false;
    let corkedBytes = 0;
    const writeBatch = () => {
      if (batch.pending === 0) return;
      const frames = batch.take();
      // A stream already ended (the connection closing) takes nothing more: the frames are dropped, as the network would.
      if (stream!.writable) stream!.write(frames);
    };
    const flush = () => {
      if (turnEnd !== undefined) clearImmediate(turnEnd);
      turnEnd = undefined;
      writeBatch();
      if (corked) {
        corked = false;
        corkedBytes = 0;
        stream!.uncork();
      }
    };
    const endOfTurn = () => {
      turnEnd = undefined;
      flush();
    };
    const send = (bytes: Uint8Array<ArrayBuffer>) => {
      if (socket.readyState !== OPEN) return socket.send(bytes);
      if (!stream) return socket.send(bytes);
      // After this turn's I/O callbacks (the check phase): every message sent meanwhile goes in one write.
      turnEnd ??= setImmediate(endOfTurn);
      if (smallFramesDirect && bytes.length < SMALL_FRAME_MAX_BYTES) {
        if (!batch.add(bytes)) {
          writeBatch();
          batch.add(bytes);
        }
        return;
      }
      writeBatch();
      if (!corked) {
        corked = true;
        stream.cork();
      }
      socket.send(bytes);
      if ((corkedBytes += bytes.length) >= MAX_CORKED_BYTES) flush();
    };
    let opened = false;
    let lastError = "";
    const listeners: ((bytes: Uint8Array) => void)[] = [];
    const early: Uint8Array[] = [];
    let endResolve!: (ending: SocketEnding) => void;
    const ended = new Promise<SocketEnding>((done) => (endResolve = done));
    socket.addEventListener("error", ((event: { message?: string; error?: unknown }) => {
      lastError = event.message ?? (event.error instanceof Error ? event.error.message : "connection failed");
    }) as (event: never) => void);
    const onMessage = (bytes: Uint8Array | undefined) => {
      if (!bytes) return; // a text message: ignored
      if (listeners.length === 0) early.push(bytes);
      for (const listener of listeners) listener(bytes);
    };
    if (typeof socket.on === "function") socket.on("message", (data, isBinary) => onMessage(isBinary ? binaryOf(data) : undefined));
    else socket.addEventListener("message", ((event: { data: unknown }) => onMessage(binaryOf(event.data))) as (event: never) => void);
    socket.addEventListener("close", ((event: { code: number }) => {
      // 1006 is what every implementation reports when no Close frame arrived.
      const ending = { clean: event.code !== 1006, code: event.code };
      endResolve(ending);
      if (!opened) {
        const status = /Unexpected server response: (\d+)/.exec(lastError);
        reject({ status: status ? Number(status[1]) : undefined, message: lastError || `closed with ${event.code} before opening` } satisfies OpenFailure);
      }
    }) as (event: never) => void);
    let pauses = 0;
    socket.addEventListener("open", (() => {
      opened = true;
      smallFramesDirect = stream !== undefined && typeof stream.write === "function" && typeof stream.prependListener === "function" && (socket as { extensions?: unknown }).extensions === "";
      // What `ws` writes by itself (a Close or a Pong in reply) it writes as it reads a frame: the
      // batch goes first, so nothing sent before is overtaken.
      if (smallFramesDirect) stream!.prependListener("data", writeBatch);
      resolve({
        // A view over a SharedArrayBuffer is copied: a WHATWG WebSocket sends only ArrayBuffer views.
        send: (bytes) => send(bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes)),
        // What was sent before goes first, also before an abrupt end.
        close: () => (flush(), socket.close()),
        terminate: () => (flush(), socket.terminate ? socket.terminate() : socket.close()),
        onMessage: (listener) => {
          listeners.push(listener);
          for (const bytes of early.splice(0)) listener(bytes);
        },
        ended,
        get isOpen() {
          return socket.readyState === OPEN;
        },
        get bufferedAmount() {
          return (socket.bufferedAmount ?? 0) + batch.pending;
        },
        pauseIncoming: () => {
          let resumed = false;
          if (pauses++ === 0) socket.pause?.();
          return () => {
            if (resumed) return;
            resumed = true;
            if (--pauses === 0) socket.resume?.();
          };
        },
      });
    }) as (event: never) => void);
  });
}
