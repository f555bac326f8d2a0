// The proxy's one multiplexed connection: the Frames server and the one begin per connection,
// whichever family. Every scope and every channel the provider opens is a family's: the registry
// (families/multiplexed.ts) says which family serves a scope's endpoint, and the family that began
// serves the begin scope's channels.
import { logEvent } from "@diverge/multiplexer/log";
import { FrameSocket, MultiplexerError, type Corkable, type Disregard, type Responder, type WebSocketLike } from "@diverge/multiplexer";
import type { Gate } from "../families/secrets/gate.js";
import type { ResolvedProxyOptions } from "../context.js";
import type { SharedInwardMcp } from "../families/mcp-inward/shared.js";
import type { PairLink } from "./pairs.js";
import { openMultiplexedFamilies, type MultiplexedFamilies } from "../families/multiplexed.js";
import type { BeginFamily, ConnectionCounters, ConnectionServices } from "./family.js";

const DISREGARDED_KEPT = 1000;

export interface BeginState {
  /** The scope of the begin being answered, or of the one answered `Begun`; undefined after a refusal. */
  scope?: number;
  /** True once `Begun` was sent. */
  begun: boolean;
  /** The family that began: it serves the begin scope's channels. */
  family?: BeginFamily;
}

/** How the connection ended: its close code (undefined when the proxy closed it) and whether the provider ever sent anything. */
export interface ConnectionEnd {
  readonly code: number | undefined;
  readonly spoken: boolean;
}

export class ProxyConnection {
  readonly frames: FrameSocket;
  readonly postgres: MultiplexedFamilies["postgres"];
  readonly daemons: MultiplexedFamilies["daemons"];
  readonly begin: BeginState = { begun: false };
  /** The last frames disregarded (at most 1000), for logs and tests; `disregardedCount` counts them all. */
  readonly disregarded: Disregard[] = [];
  disregardedCount = 0;
  /** True once the provider has sent its first message. */
  spoken = false;
  /** Every family's adapter on this connection. */
  readonly families: MultiplexedFamilies;
  /** Aborts the calls to the program's HTTP server (`/register`, `/secrets`, the run loop's) when the connection ends. */
  private readonly aborter = new AbortController();
  private beginScope: Responder | undefined;
  private markBegun!: () => void;
  private failBegun!: (error: Error) => void;
  private readonly begunPromise: Promise<void>;
  /** Resolves once `Begun` has been sent; rejects when the connection ends first. */
  get whenBegun(): Promise<void> {
    return this.begunPromise;
  }
  private ended = false;
  private unmounted: Promise<void> = Promise.resolve();
  /** What the families count: notifications dropped per tag-7 channel, answers over the limit. */
  private readonly counters: ConnectionCounters = { oversizedAnswers: 0, dropped: {} };
  private refusedChannels = 0;
  private refusedScopes = 0;

  constructor(
    socket: WebSocketLike,
    private readonly options: ResolvedProxyOptions,
    gate: Gate,
    private readonly onEnd: (how: ConnectionEnd) => void,
    /** The proxy's one MCP client to the container's server, shared with the paths transport's `/tool/*`. */
    mcp: SharedInwardMcp,
    /** The upgrade's socket under the WebSocket: the frames of one event-loop turn leave in one write. */
    stream?: Corkable,
  ) {
    this.begunPromise = new Promise<void>((resolve, reject) => {
      this.markBegun = resolve;
      this.failBegun = reject;
    });
    // Nobody may be left waiting on a connection that never begins.
    this.begunPromise.catch(() => {});
    // Whether the provider has sent anything at all (the proxy sends nothing before its first frame).
    // Once: only the first message matters here (and `ws` makes an event object per message per listener).
    socket.addEventListener(
      "message",
      () => {
        this.spoken = true;
      },
      { once: true },
    );
    this.frames = new FrameSocket(socket, {
      role: "server",
      stream,
      maxOpenScopes: options.maxOpenScopes,
      maxOpenChannels: options.maxOpenChannels,
      events: {
        overCap: (what) => {
          if (what.kind === "scope") this.refusedScopes++;
          else this.refusedChannels++;
          this.options.log(`refused a ${what.kind} request on scope ${what.scope}: too many open`);
        },
        scope: (responder, payload) => this.guard(responder, `scope ${responder.scope}`, this.onScope(responder, payload)),
        channel: (responder, payload) => this.onChannel(responder, payload),
        authorization: () => {
          // No authorization on this connection: a type-0 frame ends it, and nothing more is sent.
          this.options.log("a type-0 frame arrived; closing the connection");
          this.frames.mux.end();
          this.frames.close(1008);
        },
        disregarded: (what) => {
          // Kept for logs and tests, but bounded: a flood of bad frames must not grow memory.
          this.disregardedCount++;
          if (this.disregarded.length >= DISREGARDED_KEPT) this.disregarded.shift();
          this.disregarded.push(what);
          this.options.log(...logEvent("disregarded a frame: {reason}", { reason: what.reason }));
        },
      },
      closed: (code) => this.cleanUp(code),
    });
    const frames = this.frames;
    const link: PairLink = {
      begun: this.begunPromise,
      get ended() {
        return frames.closed || frames.mux.ended;
      },
      openChannel: (payload, handlers) => {
        if (this.frames.mux.ended || !this.begin.begun || this.begin.scope === undefined) return undefined;
        try {
          return this.frames.mux.openChannel(this.begin.scope, payload, handlers);
        } catch (error) {
          // The begin scope is gone (the proxy is ending): no pair is made.
          if (error instanceof MultiplexerError) return undefined;
          throw error;
        }
      },
      get bufferedAmount() {
        return socket.bufferedAmount;
      },
      drained: (lowWater) => this.frames.drained(lowWater),
      pauseIncoming: () => this.frames.pauseIncoming(),
    };
    const pairOptions = { maxBacklogBytes: options.maxPairBacklogBytes, budgetBytes: options.pairBudgetBytes, stallMs: options.pairStallMs, spillBytes: options.maxPairSpillBytes, spillPool: options.spillPool, log: options.log };
    const services: ConnectionServices = {
      frames,
      options,
      gate,
      inward: mcp,
      origin: this,
      signal: this.aborter.signal,
      pairLink: link,
      pairOptions,
      counters: this.counters,
      guard: (responder, what, work) => this.guard(responder, what, work),
      claimBegin: (responder, family) => this.claimBegin(responder, family),
    };
    this.families = openMultiplexedFamilies(services);
    this.postgres = this.families.postgres;
    this.daemons = this.families.daemons;
  }

  /** Counters of this connection's bounded queues and caps. */
  stats(): { droppedNotifications: Record<string, number>; openChannels: number; refusedChannels: number; refusedScopes: number; oversizedAnswers: number } {
    return {
      droppedNotifications: { ...this.counters.dropped },
      openChannels: this.frames.mux.openTheirChannels,
      refusedChannels: this.refusedChannels,
      refusedScopes: this.refusedScopes,
      oversizedAnswers: this.counters.oversizedAnswers,
    };
  }

  /** The proxy is ending: the begin scope gets its finish, then the connection closes. */
  async close(): Promise<void> {
    this.beginScope?.finish();
    this.frames.close(1001);
    this.cleanUp();
    await this.unmounted;
  }

  private cleanUp(code?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.failBegun(new Error("the connection ended"));
    this.aborter.abort();
    this.unmounted = this.families.closeAll();
    this.onEnd({ code, spoken: this.spoken });
  }

  private onScope(responder: Responder, payload: Uint8Array): Promise<void> {
    return this.families.routeScope(responder, payload);
  }

  /** One begin per connection, whichever family: the first is answered by its family, any other while it is refused. */
  private async claimBegin(responder: Responder, family: BeginFamily): Promise<void> {
    if (this.begin.scope !== undefined) return family.refuse(responder, this.begin.begun);
    this.begin.scope = responder.scope;
    try {
      await family.answer(responder, () => {
        this.begin.begun = true;
        this.begin.family = family;
        this.beginScope = responder;
        this.markBegun();
      });
    } finally {
      // Any answer but Begun leaves the connection not begun: the provider may send another begin.
      if (!this.begin.begun) this.begin.scope = undefined;
    }
  }

  private onChannel(responder: Responder, payload: Uint8Array): void {
    // A channel on a family's own scope (a filesystem tree's stop, say) is that family's.
    if (this.families.claimsChannel(responder)) return;
    // Channels ride the begin scope only, and only once it has begun: the family that began serves them.
    if (responder.scope !== this.begin.scope || !this.begin.begun || !this.begin.family) return responder.finish();
    this.begin.family.channel(responder, payload);
  }

  /** Whatever goes wrong serving one stream ends that stream (with a finish) and nothing else. */
  private guard(responder: Responder, what: string, work: Promise<void>): void {
    work.catch((problem: unknown) => {
      this.options.log(...logEvent(`${what} failed: {error}; finishing it`, { error: problem instanceof Error ? problem.name : "error" }));
      responder.finish();
    });
  }
}
