// The pair designs: a program's database connection (TCP to the proxy's postgres listener) or daemon
// connection (WebSocket to the proxy's `/daemon`) becomes two channels on the begin scope. The proxy
// announces it on a channel of its own under a fresh id; the provider opens its half quoting the id.
// Nothing is read from the program's socket before the provider's half is open; buffering is bounded
// both ways (the program's socket pauses while the provider connection's send buffer is high, and
// the provider connection pauses while the program's socket cannot take more).
import type { Socket } from "node:net";
import { FrameError, decodeClientFrame, encodeToolsBeginServerChannelRequest } from "@diverge/codec";
import type { AnswerHandlers, OpenedChannel, Responder } from "@diverge/multiplexer";

/** What a pair needs of the provider connection. */
export interface PairLink {
  /** Resolves once `Begun` has been sent; rejects when the connection ends first. */
  readonly begun: Promise<void>;
  /** Opens a proxy channel on the begin scope; undefined when the connection has ended. */
  openChannel(payload: Uint8Array, handlers: AnswerHandlers): OpenedChannel | undefined;
  readonly bufferedAmount: number;
  drained(lowWater: number): Promise<void>;
  pauseIncoming(): () => void;
}

/** Send-buffer level of the provider connection above which a program's socket is paused. */
export const HIGH_WATER = 1024 * 1024;
/** Level at which it is resumed. */
export const LOW_WATER = 256 * 1024;

/** Traffic of the postgres pairs, for the proxy's report and the tests. */
export interface PairStats {
  /** Frames and bytes the provider sent toward drivers (database → program). */
  toProgramFrames: number;
  toProgramBytes: number;
  /** Frames and bytes sent toward the provider (program → database). */
  toProviderFrames: number;
  toProviderBytes: number;
  /** The most bytes ever waiting in one driver socket's write buffer. */
  maxProgramBuffered: number;
  /** The most bytes ever waiting in the provider connection's send buffer after a postgres frame. */
  maxProviderBuffered: number;
  /** Connections announced. */
  announced: number;
}

export function emptyPairStats(): PairStats {
  return { toProgramFrames: 0, toProgramBytes: 0, toProviderFrames: 0, toProviderBytes: 0, maxProgramBuffered: 0, maxProviderBuffered: 0, announced: 0 };
}

interface PostgresPair {
  readonly id: number;
  readonly socket: Socket;
  providerHalf?: Responder;
  proxyHalfOpen: boolean;
  socketClosed: boolean;
}

export class PostgresPairs {
  private readonly pairs = new Map<number, PostgresPair>();
  private nextId = 1;
  readonly stats = emptyPairStats();

  constructor(
    private readonly link: PairLink,
    private readonly log: (line: string) => void,
  ) {}

  /** A driver connected to the proxy's postgres listener. */
  async driverConnected(socket: Socket): Promise<void> {
    // Read nothing until the provider's half is open.
    socket.pause();
    socket.on("error", () => socket.destroy());
    try {
      await this.link.begun;
    } catch {
      socket.destroy();
      return;
    }
    if (socket.destroyed) return;
    const id = this.freshId();
    const pair: PostgresPair = { id, socket, proxyHalfOpen: true, socketClosed: false };
    this.pairs.set(id, pair);
    socket.once("close", () => {
      pair.socketClosed = true;
      pair.providerHalf?.finish();
      this.forgetIfDone(pair);
    });
    let resumeProvider: (() => void) | undefined;
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Postgres", connection_id: id }), {
      response: (bytes) => {
        // What the database says, written to the driver unread.
        if (pair.socketClosed) return;
        this.stats.toProgramFrames++;
        this.stats.toProgramBytes += bytes.length;
        const accepted = socket.write(bytes);
        if (socket.writableLength > this.stats.maxProgramBuffered) this.stats.maxProgramBuffered = socket.writableLength;
        if (!accepted && !resumeProvider) {
          resumeProvider = this.link.pauseIncoming();
          socket.once("drain", () => {
            resumeProvider?.();
            resumeProvider = undefined;
          });
          socket.once("close", () => {
            resumeProvider?.();
            resumeProvider = undefined;
          });
        }
      },
      finish: (served) => {
        pair.proxyHalfOpen = false;
        // A bare finish declines the connection; a finish after bytes means the database closed it.
        this.log(served ? `postgres connection ${id} closed by the database` : `postgres connection ${id} declined`);
        if (served) socket.end();
        else socket.destroy();
        this.forgetIfDone(pair);
      },
      lost: () => {
        pair.proxyHalfOpen = false;
        socket.destroy();
        this.forgetIfDone(pair);
      },
    });
    if (!opened) {
      socket.destroy();
      return;
    }
    this.stats.announced++;
    this.log(`postgres connection ${id} announced`);
  }

  /** The provider opened its half of connection `id` (tag 0). */
  providerHalf(id: number, responder: Responder): void {
    const pair = this.pairs.get(id);
    if (!pair || pair.providerHalf || pair.socketClosed) return responder.finish();
    pair.providerHalf = responder;
    const socket = pair.socket;
    socket.on("data", (chunk: Buffer) => {
      this.stats.toProviderFrames++;
      this.stats.toProviderBytes += chunk.length;
      responder.respond(chunk);
      const buffered = this.link.bufferedAmount;
      if (buffered > this.stats.maxProviderBuffered) this.stats.maxProviderBuffered = buffered;
      if (buffered > HIGH_WATER && !socket.isPaused()) {
        socket.pause();
        void this.link.drained(LOW_WATER).then(() => {
          if (!socket.destroyed) socket.resume();
        });
      }
    });
    socket.once("end", () => responder.finish());
    socket.resume();
  }

  /** Every driver socket ends with the connection. */
  closeAll(): void {
    for (const pair of this.pairs.values()) pair.socket.destroy();
    this.pairs.clear();
  }

  private forgetIfDone(pair: PostgresPair): void {
    if (pair.socketClosed && !pair.proxyHalfOpen && this.pairs.get(pair.id) === pair) this.pairs.delete(pair.id);
  }

  private freshId(): number {
    while (this.pairs.has(this.nextId)) this.nextId = (this.nextId + 1) >>> 0;
    const id = this.nextId;
    this.nextId = (this.nextId + 1) >>> 0;
    return id;
  }
}

/** The part of the program's WebSocket (a `ws` socket) a daemon pair uses. */
export interface ProgramSocket {
  on(event: "message", listener: (data: Buffer, isBinary: boolean) => void): unknown;
  once(event: "close", listener: () => void): unknown;
  send(data: Uint8Array): void;
  close(code?: number): void;
  terminate(): void;
  pause(): void;
  resume(): void;
}

interface DaemonPair {
  readonly id: number;
  readonly socket: ProgramSocket;
  providerHalf?: Responder;
  /** Program frames that arrived before the provider's half opened, in order. */
  readonly held: Uint8Array[];
  proxyHalfOpen: boolean;
  socketClosed: boolean;
}

export class DaemonPairs {
  private readonly pairs = new Map<number, DaemonPair>();
  private nextId = 1;

  constructor(
    private readonly link: PairLink,
    private readonly log: (line: string) => void,
  ) {}

  /** A program dialled the proxy's `/daemon`. */
  async programConnected(socket: ProgramSocket): Promise<void> {
    const held: Uint8Array[] = [];
    let pair: DaemonPair | undefined;
    socket.on("message", (data: Buffer, isBinary: boolean) => {
      if (!isBinary) return;
      if (pair?.providerHalf) this.relay(pair, data);
      else {
        held.push(data);
        // The daemon protocol is client-first, so little arrives before the half opens; bound it.
        if (held.length > 64) socket.pause();
      }
    });
    let closedEarly = false;
    socket.once("close", () => {
      closedEarly = true;
      if (!pair) return;
      pair.socketClosed = true;
      pair.providerHalf?.finish();
      this.forgetIfDone(pair);
    });
    try {
      await this.link.begun;
    } catch {
      socket.terminate();
      return;
    }
    if (closedEarly) return;
    const id = this.freshId();
    const current: DaemonPair = { id, socket, held, proxyHalfOpen: true, socketClosed: false };
    pair = current;
    this.pairs.set(id, current);
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Daemon", connection_id: id }), {
      // Each response is one daemon server frame, written to the program as one message, unread.
      response: (frame) => {
        if (!current.socketClosed) socket.send(frame);
      },
      finish: (served) => {
        current.proxyHalfOpen = false;
        this.log(served ? `daemon connection ${id} closed by the daemon` : `daemon connection ${id} declined`);
        socket.close(1000);
        this.forgetIfDone(current);
      },
      lost: () => {
        current.proxyHalfOpen = false;
        socket.terminate();
        this.forgetIfDone(current);
      },
    });
    if (!opened) return socket.terminate();
    this.log(`daemon connection ${id} announced`);
  }

  /** The provider opened its half of daemon connection `id` (tag 2). */
  providerHalf(id: number, responder: Responder): void {
    const pair = this.pairs.get(id);
    if (!pair || pair.providerHalf || pair.socketClosed) return responder.finish();
    pair.providerHalf = responder;
    for (const frame of pair.held.splice(0)) {
      if (!this.relay(pair, frame)) return;
    }
    pair.socket.resume();
  }

  closeAll(): void {
    for (const pair of this.pairs.values()) pair.socket.terminate();
    this.pairs.clear();
  }

  /** Relays one program frame; a frame that is no client frame, or an auth frame, ends the connection. */
  private relay(pair: DaemonPair, frame: Uint8Array): boolean {
    const half = pair.providerHalf!;
    if (half.finished) return false;
    let valid = true;
    try {
      valid = decodeClientFrame(frame).type !== "Authorization";
    } catch (error) {
      if (!(error instanceof FrameError)) throw error;
      valid = false;
    }
    if (!valid) {
      this.log(`daemon connection ${pair.id}: the program sent something that is not a daemon client frame; closing it`);
      half.finish();
      pair.socket.close(1008);
      return false;
    }
    half.respond(frame);
    return true;
  }

  private forgetIfDone(pair: DaemonPair): void {
    if (pair.socketClosed && !pair.proxyHalfOpen && this.pairs.get(pair.id) === pair) this.pairs.delete(pair.id);
  }

  private freshId(): number {
    while (this.pairs.has(this.nextId)) this.nextId = (this.nextId + 1) >>> 0;
    const id = this.nextId;
    this.nextId = (this.nextId + 1) >>> 0;
    return id;
  }
}
