// The pair designs: a program's database connection (TCP to the proxy's postgres listener) or daemon
// connection (WebSocket to the proxy's `/daemon`) becomes two channels on the begin scope. The proxy
// announces it on a channel of its own under a fresh id; the provider opens its half quoting the id.
// Nothing is read from the program's socket before the provider's half is open.
//
// Buffering is bounded both ways, and per channel:
// - Program → provider: the program's socket pauses while the provider connection's send buffer is
//   above HIGH_WATER and resumes once it drains to LOW_WATER, so a provider that does not read pushes
//   back on the program (TCP), not into the proxy's memory.
// - Provider → program: the multiplexed wire has no flow control of its own, so this is a hybrid.
//   What the provider sends on a pair's channel is written to that program's socket; when the program
//   reads slower, it waits in that socket's buffer, and the connection keeps being read (a slow pair
//   within its budget stalls no other channel). Past the pair's budget (`pairBudgetBytes`, 2 MiB) the
//   pair holds the connection's reading paused (TCP backpressure on the provider, every channel waits)
//   until its socket drains to a quarter of the budget: a provider that sends faster than the driver
//   reads is slowed down, never cut. Two things still end a pair, and only it: a program that reads
//   nothing for `pairStallMs` (10 s) while its pair holds the connection paused (it would stall every
//   channel for good), and more than `maxPairBacklogBytes` (64 MiB, the hard cap) unread, which only a
//   connection that cannot pause (or a bound set below one message) lets happen. Then the program's
//   socket is closed, the provider's half is finished (as when the program closes it), the log says
//   so, and whatever the provider still sends on the proxy's half is discarded until it finishes it.
import type { Socket } from "node:net";
import { FrameError, decodeClientFrame, encodeToolsBeginServerChannelRequest } from "@diverge/codec";
import { BacklogHold, type AnswerHandlers, type OpenedChannel, type Responder } from "@diverge/multiplexer";

/** What a pair needs of the provider connection. */
export interface PairLink {
  /** Resolves once `Begun` has been sent; rejects when the connection ends first. */
  readonly begun: Promise<void>;
  /** Whether the connection has ended: no pair is made any more. */
  readonly ended: boolean;
  /** Opens a proxy channel on the begin scope; undefined when the connection has ended. */
  openChannel(payload: Uint8Array, handlers: AnswerHandlers): OpenedChannel | undefined;
  readonly bufferedAmount: number;
  /** Resolves once at most `lowWater` bytes wait in the connection's send buffer, or it has closed. */
  drained(lowWater: number): Promise<void>;
  /** Stops reading the connection until the returned function is called (counted: paused while any hold). */
  pauseIncoming(): () => void;
}

export interface PairOptions {
  /** The hard cap: bytes from the provider one program socket may hold unread before its pair ends. */
  readonly maxBacklogBytes: number;
  /** Bytes one program socket may hold unread before its pair pauses the connection (clamped to half the hard cap). */
  readonly budgetBytes: number;
  /** How long a pair may hold the connection paused while its program reads nothing before the pair ends. */
  readonly stallMs: number;
  readonly log: (line: string) => void;
}

/** Send-buffer level of the provider connection above which a program's socket is paused. */
export const HIGH_WATER = 1024 * 1024;
/** Level at which it is resumed. */
export const LOW_WATER = 256 * 1024;
/** Default of `maxPairBacklogBytes`, the hard cap: bytes a program's socket may hold unread before its pair ends. */
export const DEFAULT_PAIR_BACKLOG_BYTES = 64 * 1024 * 1024;
/** Default of `pairBudgetBytes`: bytes a program's socket may hold unread before its pair pauses the connection. */
export const DEFAULT_PAIR_BUDGET_BYTES = 2 * 1024 * 1024;
/** Default of `pairStallMs`: how long a pair may keep the connection paused with its program reading nothing. */
export const DEFAULT_PAIR_STALL_MS = 10_000;
/** Daemon frames held before the provider's half opens: past either bound the program's socket pauses. */
const HELD_FRAMES = 64;
const HELD_BYTES = 1024 * 1024;
/** How long a program socket closed by the proxy has to answer the close handshake before it is cut. */
const CLOSE_GRACE_MS = 1000;

/** Traffic of the postgres (or daemon) pairs, for the proxy's report and the tests. */
export interface PairStats {
  /** Frames and bytes the provider sent toward the program (database → driver, daemon → program). */
  toProgramFrames: number;
  toProgramBytes: number;
  /** Frames and bytes sent toward the provider (program → database or daemon). */
  toProviderFrames: number;
  toProviderBytes: number;
  /** The most bytes ever waiting unread in one program socket's write buffer. */
  maxProgramBuffered: number;
  /** The most bytes ever waiting in the provider connection's send buffer after a pair's frame. */
  maxProviderBuffered: number;
  /** Connections announced. */
  announced: number;
  /** Pairs ended because their program left more than the hard cap unread. */
  endedOverBacklog: number;
  /** Times a pair past its budget paused the connection (resumed once its program read it down). */
  pausedConnection: number;
  /** Pairs ended because their program read nothing for `pairStallMs` while they held the connection paused. */
  endedStalled: number;
  /** Pairs holding the connection paused now. */
  holdingNow: number;
  /** Bytes the provider sent on pairs already ended (discarded). */
  discardedBytes: number;
}

export function emptyPairStats(): PairStats {
  return {
    toProgramFrames: 0,
    toProgramBytes: 0,
    toProviderFrames: 0,
    toProviderBytes: 0,
    maxProgramBuffered: 0,
    maxProviderBuffered: 0,
    announced: 0,
    endedOverBacklog: 0,
    pausedConnection: 0,
    endedStalled: 0,
    holdingNow: 0,
    discardedBytes: 0,
  };
}

/**
 * The provider → program direction of one pair: the program's socket buffers up to the budget; past
 * it the pair holds the connection paused until the socket drains to a quarter of the budget, and a
 * program that reads nothing for `stallMs` meanwhile is told to `stalled`.
 */
class ProgramBacklog {
  private readonly hold: BacklogHold;
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(link: PairLink, options: PairOptions, stats: PairStats, stalled: () => void) {
    const budget = Math.max(1, Math.min(options.budgetBytes, Math.floor(options.maxBacklogBytes / 2)));
    this.hold = new BacklogHold(() => link.pauseIncoming(), budget, Math.floor(budget / 4), (holding) => {
      if (holding) {
        stats.pausedConnection++;
        stats.holdingNow++;
        this.stallTimer = setTimeout(stalled, options.stallMs);
        this.stallTimer.unref?.();
      } else {
        stats.holdingNow--;
        clearTimeout(this.stallTimer);
        this.stallTimer = undefined;
      }
    });
  }

  /** Bytes waiting in the program's socket after a write. */
  wrote(waiting: number): void {
    this.hold.update(waiting);
  }

  /** A write left the socket's buffer (the program is reading): the stall timer starts over. */
  flushed(waiting: number): void {
    this.stallTimer?.refresh();
    this.hold.update(waiting);
  }

  /** The pair is over: the connection is no longer held for it. */
  dispose(): void {
    this.hold.dispose();
  }
}

interface PostgresPair {
  readonly id: number;
  readonly socket: Socket;
  providerHalf?: Responder;
  proxyHalfOpen: boolean;
  socketClosed: boolean;
  /** The socket is paused until the provider connection's send buffer drains. */
  waitingForDrain: boolean;
  backlog?: ProgramBacklog;
}

export class PostgresPairs {
  private readonly pairs = new Map<number, PostgresPair>();
  private nextId = 1;
  readonly stats = emptyPairStats();

  constructor(
    private readonly link: PairLink,
    private readonly options: PairOptions,
  ) {}

  /** Pairs the proxy keeps now (for the tests: nothing outlives its two halves). */
  get size(): number {
    return this.pairs.size;
  }

  /** A driver connected to the proxy's postgres listener. */
  async driverConnected(socket: Socket): Promise<void> {
    // Read nothing until the provider's half is open.
    socket.pause();
    socket.on("error", () => socket.destroy());
    if (this.link.ended) return void socket.destroy();
    try {
      await this.link.begun;
    } catch {
      socket.destroy();
      return;
    }
    if (socket.destroyed || this.link.ended) return void socket.destroy();
    const id = this.freshId();
    const pair: PostgresPair = { id, socket, proxyHalfOpen: true, socketClosed: false, waitingForDrain: false };
    const backlog = new ProgramBacklog(this.link, this.options, this.stats, () => {
      if (pair.socketClosed) return;
      this.stats.endedStalled++;
      this.options.log(`postgres connection ${id}: the driver read nothing for ${this.options.stallMs} ms while the connection waited on it; closing it`);
      this.programGone(pair);
      socket.destroy();
    });
    pair.backlog = backlog;
    const flushed = () => {
      if (!pair.socketClosed) backlog.flushed(socket.writableLength);
    };
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Postgres", connection_id: id }), {
      response: (bytes) => {
        // What the database says, written to the driver; the socket's buffer is the channel's, up to its budget.
        if (pair.socketClosed) {
          this.stats.discardedBytes += bytes.length;
          return;
        }
        this.stats.toProgramFrames++;
        this.stats.toProgramBytes += bytes.length;
        socket.write(bytes, flushed);
        const waiting = socket.writableLength;
        if (waiting > this.stats.maxProgramBuffered) this.stats.maxProgramBuffered = waiting;
        if (waiting > this.options.maxBacklogBytes) {
          this.stats.endedOverBacklog++;
          this.options.log(`postgres connection ${id}: the driver left more than ${this.options.maxBacklogBytes} bytes unread; closing it`);
          this.programGone(pair);
          socket.destroy();
          return;
        }
        backlog.wrote(waiting);
      },
      finish: (served) => {
        pair.proxyHalfOpen = false;
        // A bare finish declines the connection; a finish after bytes means the database closed it.
        this.options.log(served ? `postgres connection ${id} closed by the database` : `postgres connection ${id} declined`);
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
    if (!opened) return void socket.destroy();
    this.pairs.set(id, pair);
    socket.once("close", () => {
      this.programGone(pair);
      this.forgetIfDone(pair);
    });
    this.stats.announced++;
    this.options.log(`postgres connection ${id} announced`);
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
      if (buffered > HIGH_WATER && !pair.waitingForDrain) {
        pair.waitingForDrain = true;
        socket.pause();
        void this.link.drained(LOW_WATER).then(() => {
          pair.waitingForDrain = false;
          if (!socket.destroyed) socket.resume();
        });
      }
    });
    socket.once("end", () => responder.finish());
    socket.resume();
  }

  /** Every driver socket ends with the connection. */
  closeAll(): void {
    for (const pair of this.pairs.values()) {
      pair.backlog?.dispose();
      pair.socket.destroy();
    }
    this.pairs.clear();
  }

  /** The driver's side is over: nothing more is written to it, the connection is not held for it, and the provider's half is finished. */
  private programGone(pair: PostgresPair): void {
    pair.socketClosed = true;
    pair.backlog?.dispose();
    pair.providerHalf?.finish();
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
  /** `sent` is called once the message has left the socket's buffer (ws does). */
  send(data: Uint8Array, sent?: (error?: Error) => void): void;
  close(code?: number): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  readonly bufferedAmount: number;
}

interface DaemonPair {
  readonly id: number;
  readonly socket: ProgramSocket;
  providerHalf?: Responder;
  /** Program frames that arrived before the provider's half opened, in order. */
  readonly held: Uint8Array[];
  proxyHalfOpen: boolean;
  socketClosed: boolean;
  waitingForDrain: boolean;
  backlog?: ProgramBacklog;
  /** Closes the program's socket at once with `code` (a grace for its close handshake, then cut). */
  closeSocket?: (code: number) => void;
}

export class DaemonPairs {
  private readonly pairs = new Map<number, DaemonPair>();
  private nextId = 1;
  readonly stats = emptyPairStats();

  constructor(
    private readonly link: PairLink,
    private readonly options: PairOptions,
  ) {}

  get size(): number {
    return this.pairs.size;
  }

  /** A program dialled the proxy's `/daemon` (its socket may come paused, held before the provider). */
  async programConnected(socket: ProgramSocket): Promise<void> {
    const held: Uint8Array[] = [];
    let heldBytes = 0;
    let pair: DaemonPair | undefined;
    // Once the proxy has closed (or is closing) the socket, whatever the program still sends is dropped.
    let closing = false;
    socket.on("message", (data: Buffer, isBinary: boolean) => {
      if (!isBinary || closing) return;
      if (pair?.providerHalf) return void this.relay(pair, data);
      held.push(data);
      heldBytes += data.length;
      // The daemon protocol is client-first, so little arrives before the half opens; bound it.
      if (held.length > HELD_FRAMES || heldBytes > HELD_BYTES) socket.pause();
    });
    let closedEarly = false;
    let graceTimer: NodeJS.Timeout | undefined;
    socket.once("close", () => {
      closedEarly = true;
      closing = true;
      held.length = 0;
      if (graceTimer) clearTimeout(graceTimer);
      if (!pair) return;
      pair.socketClosed = true;
      pair.backlog?.dispose();
      pair.providerHalf?.finish();
      this.forgetIfDone(pair);
    });
    /** Closes the program's socket at once: reading again so its close handshake can complete, cut after a grace. */
    const closeSocket = (code: number) => {
      closing = true;
      // Nothing more is written to it: the connection is no longer held for it.
      pair?.backlog?.dispose();
      socket.resume();
      socket.close(code);
      graceTimer ??= setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
      graceTimer.unref?.();
    };
    socket.resume();
    if (this.link.ended) return socket.terminate();
    try {
      await this.link.begun;
    } catch {
      socket.terminate();
      return;
    }
    if (closedEarly) return;
    if (this.link.ended) return socket.terminate();
    const id = this.freshId();
    const current: DaemonPair = { id, socket, held, proxyHalfOpen: true, socketClosed: false, waitingForDrain: false };
    /** Ends the pair from the proxy's side: nothing more is written to the program, which is cut (it does not read). */
    const cut = () => {
      closing = true;
      current.socketClosed = true;
      current.backlog?.dispose();
      current.providerHalf?.finish();
      socket.terminate();
    };
    const backlog = new ProgramBacklog(this.link, this.options, this.stats, () => {
      if (current.socketClosed || closing) return;
      this.stats.endedStalled++;
      this.options.log(`daemon connection ${id}: the program read nothing for ${this.options.stallMs} ms while the connection waited on it; closing it`);
      cut();
    });
    current.backlog = backlog;
    const flushed = () => {
      if (!current.socketClosed) backlog.flushed(socket.bufferedAmount);
    };
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Daemon", connection_id: id }), {
      // Each response is one daemon server frame, written to the program as one message, up to the pair's budget.
      response: (frame) => {
        if (current.socketClosed || closing) {
          this.stats.discardedBytes += frame.length;
          return;
        }
        this.stats.toProgramFrames++;
        this.stats.toProgramBytes += frame.length;
        socket.send(frame, flushed);
        const waiting = socket.bufferedAmount;
        if (waiting > this.stats.maxProgramBuffered) this.stats.maxProgramBuffered = waiting;
        if (waiting > this.options.maxBacklogBytes) {
          this.stats.endedOverBacklog++;
          this.options.log(`daemon connection ${id}: the program left more than ${this.options.maxBacklogBytes} bytes unread; closing it`);
          return cut();
        }
        backlog.wrote(waiting);
      },
      finish: (served) => {
        current.proxyHalfOpen = false;
        this.options.log(served ? `daemon connection ${id} closed by the daemon` : `daemon connection ${id} declined`);
        closeSocket(1000);
        this.forgetIfDone(current);
      },
      lost: () => {
        current.proxyHalfOpen = false;
        socket.terminate();
        this.forgetIfDone(current);
      },
    });
    if (!opened) return socket.terminate();
    pair = current;
    this.pairs.set(id, current);
    this.stats.announced++;
    this.options.log(`daemon connection ${id} announced`);
    current.closeSocket = closeSocket;
  }

  /** The provider opened its half of daemon connection `id` (tag 2). */
  providerHalf(id: number, responder: Responder): void {
    const pair = this.pairs.get(id);
    if (!pair || pair.providerHalf || pair.socketClosed) return responder.finish();
    pair.providerHalf = responder;
    for (const frame of pair.held.splice(0)) {
      if (!this.relay(pair, frame)) return;
    }
    if (!pair.waitingForDrain) pair.socket.resume();
  }

  closeAll(): void {
    for (const pair of this.pairs.values()) {
      pair.backlog?.dispose();
      pair.socket.terminate();
    }
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
      this.options.log(`daemon connection ${pair.id}: the program sent something that is not a daemon client frame; closing it`);
      half.finish();
      pair.closeSocket?.(1008);
      return false;
    }
    half.respond(frame);
    this.stats.toProviderFrames++;
    this.stats.toProviderBytes += frame.length;
    const buffered = this.link.bufferedAmount;
    if (buffered > this.stats.maxProviderBuffered) this.stats.maxProviderBuffered = buffered;
    if (buffered > HIGH_WATER && !pair.waitingForDrain) {
      // The provider is not keeping up: stop reading this program until its send buffer drains.
      pair.waitingForDrain = true;
      pair.socket.pause();
      void this.link.drained(LOW_WATER).then(() => {
        pair.waitingForDrain = false;
        if (!pair.socketClosed) pair.socket.resume();
      });
    }
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
