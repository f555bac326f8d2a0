// The proxy's one multiplexed connection: the Frames server and the tools::begin scope. Every other
// scope and every channel the provider opens is a family's: the registry (families/multiplexed.ts)
// gives the tables they are dispatched on.
import {
  ContainerProxyRequestError,
  ToolsBeginChannelRequestError,
  decodeContainerProxyRequest,
  decodeToolsBeginChannelRequest,
  encodeToolsBeginResponse,
  type ContainerProxyRequest,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { FrameSocket, MultiplexerError, type Corkable, type Disregard, type Responder, type WebSocketLike } from "@diverge/multiplexer";
import type { Gate } from "../families/secrets/gate.js";
import type { ResolvedProxyOptions } from "../context.js";
import type { SharedInwardMcp } from "../families/mcp-inward/shared.js";
import type { PairLink } from "./pairs.js";
import { postToProgram } from "./program.js";
import { openMultiplexedFamilies, type MultiplexedFamilies } from "../families/multiplexed.js";
import type { ConnectionCounters, ConnectionServices, ScopeRoutes } from "./family.js";

const DISREGARDED_KEPT = 1000;

export interface BeginState {
  /** The scope of the begin being answered, or of the one answered `Begun`; undefined after a refusal. */
  scope?: number;
  /** True once `Begun` was sent. */
  begun: boolean;
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
  private readonly families: MultiplexedFamilies;
  /** What each scope the provider opens does: the begin is the connection's, the rest the families'. */
  private readonly scopeRoutes: ScopeRoutes;
  /** Aborts the calls to the program's HTTP server (`/register`, `/secrets`) when the connection ends. */
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
    socket.addEventListener("message", () => {
      this.spoken = true;
    });
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
          this.options.log(`disregarded a frame: ${what.reason}`);
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
    const pairOptions = { maxBacklogBytes: options.maxPairBacklogBytes, budgetBytes: options.pairBudgetBytes, stallMs: options.pairStallMs, log: options.log };
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
    };
    this.families = openMultiplexedFamilies(services);
    this.postgres = this.families.postgres;
    this.daemons = this.families.daemons;
    this.scopeRoutes = { ToolsBegin: (request, responder) => this.onBegin(responder, request.begin), ...this.families.scopes };
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

  private async onScope(responder: Responder, payload: Uint8Array): Promise<void> {
    let request: ContainerProxyRequest;
    try {
      request = decodeContainerProxyRequest(payload);
    } catch (error) {
      if (!(error instanceof ContainerProxyRequestError)) throw error;
      this.options.log(`unreadable request on scope ${responder.scope}: ${error.message}`);
      return responder.finish();
    }
    await (this.scopeRoutes[request.endpoint] as (request: ContainerProxyRequest, responder: Responder) => Promise<void>)(request, responder);
  }

  private async onBegin(responder: Responder, begin: Record<string, unknown>): Promise<void> {
    if (!isBeginObject(begin)) {
      this.options.log(`unreadable begin on scope ${responder.scope}: it needs "arguments" and, if any, an "image" of two strings`);
      return responder.finish();
    }
    if (this.begin.scope !== undefined) {
      // Begun, or a begin is being answered now: this one gets one error and the finish.
      const error = this.begin.begun ? "the connection has already begun" : "another begin is being answered";
      responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: { error } }));
      return responder.finish();
    }
    this.begin.scope = responder.scope;
    try {
      await this.answerBegin(responder, begin);
    } finally {
      // Any answer but Begun leaves the connection not begun: the provider may send another begin.
      if (!this.begin.begun) this.begin.scope = undefined;
    }
  }

  private async answerBegin(responder: Responder, begin: Record<string, unknown>): Promise<void> {
    const answer = await postToProgram(this.options.appPort, "/register", JSON.stringify(begin.arguments ?? null), this.aborter.signal);
    if (responder.finished) return;
    if (answer.ok) {
      const tools = parseJson(answer.body);
      if (Array.isArray(tools)) {
        responder.respond(encodeToolsBeginResponse({ variant: "Begun", tools }));
        this.begin.begun = true;
        this.beginScope = responder;
        this.options.log(`begun with ${tools.length} tool(s)`);
        this.markBegun();
        return;
      }
      this.options.log("the program declared no JSON array of tools; the connection is not begun");
      responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: { error: "the program declared no JSON array of tools", status: answer.status } }));
      return responder.finish();
    }
    this.options.log(`the program refused the begin (HTTP ${answer.status ?? "unreachable"}); the connection is not begun`);
    responder.respond(encodeToolsBeginResponse({ variant: "NotBegun", error: answer.error }));
    responder.finish();
  }

  private onChannel(responder: Responder, payload: Uint8Array): void {
    // A channel on a family's own scope (a filesystem tree's stop, say) is that family's.
    if (this.families.claimsChannel(responder)) return;
    // Channels ride the begin scope only, and only once it has begun.
    if (responder.scope !== this.begin.scope || !this.begin.begun) return responder.finish();
    let request: ToolsBeginChannelRequest;
    try {
      request = decodeToolsBeginChannelRequest(payload, { check: checkMcp });
    } catch (error) {
      if (!(error instanceof ToolsBeginChannelRequestError)) throw error;
      this.options.log(`unreadable channel request on channel ${responder.channel}: ${error.message}`);
      return responder.finish();
    }
    this.families.routeChannel(request, responder);
  }

  /** Whatever goes wrong serving one stream ends that stream (with a finish) and nothing else. */
  private guard(responder: Responder, what: string, work: Promise<void>): void {
    work.catch((problem: unknown) => {
      this.options.log(`${what} failed: ${problem instanceof Error ? problem.name : "error"}; finishing it`);
      responder.finish();
    });
  }
}

/** `{"arguments": <any>, "image"?: {"name": string, "digest": string}}`. */
function isBeginObject(begin: Record<string, unknown>): boolean {
  if (!("arguments" in begin)) return false;
  if (!("image" in begin)) return true;
  const image = begin.image as { name?: unknown; digest?: unknown } | null;
  return typeof image === "object" && image !== null && typeof image.name === "string" && typeof image.digest === "string";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
