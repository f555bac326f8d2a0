// A Multiplexer bound to a WebSocket: binary messages in, frames out, text messages ignored, the
// close ending every scope and channel. Works with `ws` and with any WHATWG-shaped WebSocket.
import { BinaryMessageWriter } from "./message-writer.js";
import { Multiplexer, type MultiplexerEvents, type Role } from "./multiplexer.js";

/** The part of a WebSocket this module uses; `ws`'s WebSocket and the WHATWG one both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  binaryType: string;
  /** WHATWG `send` takes a `BufferSource`, whose views are over an `ArrayBuffer` (never a `SharedArrayBuffer`). */
  send(data: Uint8Array<ArrayBuffer>): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void, options?: { readonly once?: boolean }): void;
  /** `ws` only: Node-style listeners (a message as `(data, isBinary)`, no event object per message). */
  on?(type: "message", listener: (data: unknown, isBinary: boolean) => void): unknown;
  /** The extensions the handshake agreed on ("" for none). */
  readonly extensions?: string;
  /** `ws` only: stop reading from the socket (TCP backpressure reaches the sender). */
  pause?(): void;
  resume?(): void;
}

const OPEN = 1;

export interface FrameSocketOptions {
  readonly role: Role;
  readonly events?: MultiplexerEvents;
  /** Server only: open scopes the client may hold at once (see `MultiplexerOptions`). */
  readonly maxOpenScopes?: number;
  /** Channels the other party may hold open at once (see `MultiplexerOptions`). */
  readonly maxOpenChannels?: number;
  /** Called once when the WebSocket closes, after every open stream has been told. */
  readonly closed?: (code: number) => void;
  /**
   * The byte stream under the WebSocket (with `ws`: the upgrade's socket), when it can be reached.
   * Frames sent in one turn of the event loop are then corked on it and leave in one write: under
   * load, one system call carries many answers (and each answer's finish) instead of one per frame.
   * With `ws` and no extension agreed, each frame is also written onto it as one binary message by
   * this module's own writer (one buffer per frame, masked in place on the client's side).
   */
  readonly stream?: Corkable;
}

/** A byte stream that can hold its writes back and let them go in one (Node's `net.Socket`). */
export interface Corkable {
  cork(): void;
  uncork(): void;
  /** Node's `net.Socket` has it: then the frames' messages can be written onto the stream directly. */
  write?(chunk: Uint8Array): boolean;
}

/**
 * The most bytes held corked in one turn: past it they go at once. Corked bytes count in the
 * WebSocket's `bufferedAmount` though the network may take them, so a bound keeps a burst from
 * reading as a peer that does not keep pace (backlog checks drop notifications on it).
 */
const MAX_CORKED_BYTES = 64 * 1024;

/** Polling interval while waiting for the socket's send buffer to drain. */
const DRAIN_POLL_MS = 2;

export class FrameSocket {
  readonly mux: Multiplexer;
  private pauses = 0;
  private isClosed = false;
  private drainWaiters: { readonly lowWater: number; readonly resolve: () => void }[] = [];
  private drainTimer: ReturnType<typeof setTimeout> | undefined;
  /** The uncork at the end of this turn of the event loop, while the stream is corked. */
  private uncorking: ReturnType<typeof setImmediate> | undefined;
  private corkedBytes = 0;
  private readonly stream: Corkable | undefined;
  private readonly writer: BinaryMessageWriter | undefined;

  constructor(readonly socket: WebSocketLike, options: FrameSocketOptions) {
    if (socket.binaryType === "blob") socket.binaryType = "arraybuffer";
    this.stream = options.stream;
    const stream = options.stream;
    // Only `ws` (which has `on`) is known to write nothing of its own between whole messages; an
    // extension (compression) would change what a message's bytes are.
    if (stream?.write && typeof socket.on === "function" && socket.extensions === "") {
      this.writer = new BinaryMessageWriter({ write: (chunk) => stream.write!(chunk) }, options.role === "client");
    }
    const writer = this.writer;
    this.mux = new Multiplexer({
      role: options.role,
      events: options.events,
      maxOpenScopes: options.maxOpenScopes,
      maxOpenChannels: options.maxOpenChannels,
      send: (frame) => {
        if (socket.readyState !== OPEN) return;
        if (this.stream && this.uncorking === undefined) {
          this.stream.cork();
          // After this turn's I/O callbacks (the check phase): every frame sent meanwhile goes in one write.
          this.uncorking = setImmediate(() => this.flush());
        }
        socket.send(frame);
        if (this.uncorking !== undefined && (this.corkedBytes += frame.length) >= MAX_CORKED_BYTES) this.flush();
      },
      sendFrame: writer
        ? (parts) => {
            if (socket.readyState !== OPEN) return;
            if (this.stream && this.uncorking === undefined) {
              this.stream.cork();
              this.uncorking = setImmediate(() => this.flush());
            }
            let length = 0;
            for (const part of parts) length += part.length;
            writer.write(parts);
            if (this.uncorking !== undefined && (this.corkedBytes += length) >= MAX_CORKED_BYTES) this.flush();
          }
        : undefined,
    });
    if (writer) {
      // `ws`: the message itself, not an event object made for it.
      socket.on!("message", (data, isBinary) => {
        const bytes = isBinary ? binaryOf(data) : undefined;
        if (bytes) this.mux.receive(bytes);
      });
    } else {
      socket.addEventListener("message", (event: { data: unknown }) => {
        const bytes = binaryOf(event.data);
        // Text messages carry no meaning on this connection.
        if (bytes) this.mux.receive(bytes);
      });
    }
    socket.addEventListener("close", (event: { code?: number }) => {
      if (this.isClosed) return;
      this.isClosed = true;
      if (this.drainTimer !== undefined) clearTimeout(this.drainTimer);
      this.drainTimer = undefined;
      this.releaseDrained();
      this.mux.end();
      options.closed?.(event.code ?? 1006);
    });
  }

  /** Whether frames are written onto the stream by this module's own message writer (else by the WebSocket's `send`). */
  get writesMessages(): boolean {
    return this.writer !== undefined;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Bytes queued for sending and not yet handed to the network. */
  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  /**
   * Resolves once at most `lowWater` bytes wait to be sent, or the socket has closed. Every waiter
   * shares one poll (the WebSocket has no drain event), and the close releases them all at once.
   */
  drained(lowWater: number): Promise<void> {
    if (this.socket.bufferedAmount <= lowWater || this.isClosed) return Promise.resolve();
    return new Promise((resolve) => {
      this.drainWaiters.push({ lowWater, resolve });
      this.pollDrain();
    });
  }

  /** Callers waiting in `drained()` now. */
  get drainWaiting(): number {
    return this.drainWaiters.length;
  }

  private pollDrain(): void {
    if (this.drainTimer !== undefined || this.drainWaiters.length === 0) return;
    this.drainTimer = setTimeout(() => {
      this.drainTimer = undefined;
      this.releaseDrained();
      this.pollDrain();
    }, DRAIN_POLL_MS);
  }

  private releaseDrained(): void {
    const buffered = this.socket.bufferedAmount;
    const waiting = this.drainWaiters;
    this.drainWaiters = [];
    for (const waiter of waiting) {
      if (this.isClosed || buffered <= waiter.lowWater) waiter.resolve();
      else this.drainWaiters.push(waiter);
    }
  }

  /**
   * Stops reading from the socket until every pause has been resumed, so a slow consumer of one
   * stream pushes back on the sender instead of growing a buffer. A no-op where the WebSocket
   * implementation cannot pause.
   */
  pauseIncoming(): () => void {
    let resumed = false;
    if (this.pauses++ === 0) this.socket.pause?.();
    return () => {
      if (resumed) return;
      resumed = true;
      if (--this.pauses === 0) this.socket.resume?.();
    };
  }

  /** Lets the frames sent in this turn go now rather than at its end. */
  flush(): void {
    if (this.uncorking === undefined) return;
    clearImmediate(this.uncorking);
    this.uncorking = undefined;
    this.corkedBytes = 0;
    this.stream!.uncork();
  }

  close(code = 1000): void {
    // What was sent before the close goes first, even if the socket is cut right after (a terminate).
    this.flush();
    if (this.socket.readyState === OPEN || this.socket.readyState === 0) this.socket.close(code);
  }
}

function joined(parts: readonly Uint8Array[], length: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** The bytes of a binary message, or undefined for a text message. */
export function binaryOf(data: unknown): Uint8Array | undefined {
  if (typeof data === "string") return undefined;
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) {
    const parts = data as Uint8Array[];
    return joined(parts, parts.reduce((sum, part) => sum + part.length, 0));
  }
  return undefined;
}
