// The daemon family on the multiplexed connection: a program's daemon connection (WebSocket to the
// proxy's `/daemon`) as a pair on the begin scope, announced on proxy-opened tag 1 and joined by the
// provider's half on provider-opened tag 2. The flow control is the pair engine's
// (multiplexed/pairs.ts, whose header tells how buffering is bounded both ways).
import { FrameError, decodeClientFrame, encodeToolsBeginServerChannelRequest } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import type { ConnectionServices } from "../../multiplexed/family.js";
import { cutReason, emptyPairStats, HIGH_WATER, LOW_WATER, ProgramBacklog, type PairLink, type PairOptions } from "../../multiplexed/pairs.js";

/** Daemon frames held before the provider's half opens: past either bound the program's socket pauses. */
const HELD_FRAMES = 64;
const HELD_BYTES = 1024 * 1024;
/** How long a program socket closed by the proxy has to answer the close handshake before it is cut. */
const CLOSE_GRACE_MS = 1000;

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
    const backlog = new ProgramBacklog(
      this.link,
      this.options,
      this.stats,
      {
        get buffered() {
          return socket.bufferedAmount;
        },
        write: (frame, flushed) => socket.send(frame, () => flushed()),
      },
      (why) => {
        if (current.socketClosed || closing) return;
        this.options.log(`daemon connection ${id}: the program ${cutReason(why, this.options)}; closing it`);
        cut();
      },
    );
    current.backlog = backlog;
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Daemon", connection_id: id }), {
      // Each response is one daemon server frame, written to the program as one message: within the budget to its socket, past it through disk.
      response: (frame) => {
        if (current.socketClosed || closing) {
          this.stats.discardedBytes += frame.length;
          return;
        }
        this.stats.toProgramFrames++;
        this.stats.toProgramBytes += frame.length;
        backlog.send(frame);
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
      valid = decodeClientFrame(frame).variant !== "Authorization";
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

/** The family's pairs on one connection, and what its provider-opened channel does. */
export function daemonChannels(services: ConnectionServices): { pairs: DaemonPairs; channels: Pick<ToolsBeginChannelsProviderRoutes<Responder>, "daemon"> } {
  const pairs = new DaemonPairs(services.pairLink, services.pairOptions);
  return { pairs, channels: { daemon: (request, responder) => pairs.providerHalf(request.connection_id, responder) } };
}
