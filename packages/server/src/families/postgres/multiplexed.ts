// The postgres family on the multiplexed connection: a program's database connection (TCP to the
// proxy's postgres listener) as a pair on the begin scope, announced on proxy-opened tag 0 and joined
// by the provider's half on provider-opened tag 0. The flow control is the pair engine's
// (multiplexed/pairs.ts, whose header tells how buffering is bounded both ways).
import type { Socket } from "node:net";
import { encodeToolsBeginServerChannelRequest } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import type { ConnectionServices } from "../../multiplexed/family.js";
import { cutReason, emptyPairStats, HIGH_WATER, LOW_WATER, ProgramBacklog, type PairLink, type PairOptions } from "../../multiplexed/pairs.js";

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
    const backlog = new ProgramBacklog(
      this.link,
      this.options,
      this.stats,
      {
        get buffered() {
          return socket.writableLength;
        },
        write: (bytes, flushed) => void socket.write(bytes, flushed),
        // What one read back from disk holds leaves in one writev.
        cork: () => socket.cork(),
        uncork: () => socket.uncork(),
      },
      (why) => {
        if (pair.socketClosed) return;
        this.options.log(`postgres connection ${id}: the driver ${cutReason(why, this.options)}; closing it`);
        this.programGone(pair);
        socket.destroy();
      },
    );
    pair.backlog = backlog;
    const opened = this.link.openChannel(encodeToolsBeginServerChannelRequest({ variant: "Postgres", connection_id: id }), {
      response: (bytes) => {
        // What the database says, written to the driver: within the budget to its socket, past it through disk.
        if (pair.socketClosed) {
          this.stats.discardedBytes += bytes.length;
          return;
        }
        this.stats.toProgramFrames++;
        this.stats.toProgramBytes += bytes.length;
        backlog.send(bytes);
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

/** The family's pairs on one connection, and what its provider-opened channel does. */
export function postgresChannels(services: ConnectionServices): { pairs: PostgresPairs; channels: Pick<ToolsBeginChannelsProviderRoutes<Responder>, "postgres"> } {
  const pairs = new PostgresPairs(services.pairLink, services.pairOptions);
  return { pairs, channels: { postgres: (request, responder) => pairs.providerHalf(request.connection_id, responder) } };
}
