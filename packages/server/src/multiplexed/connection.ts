// The proxy's one multiplexed connection: the Frames server, the tools::begin scope, and every
// channel the provider opens on it.
import {
  ContainerProxyRequestError,
  ToolsBeginChannelRequestError,
  decodeContainerProxyRequest,
  decodeToolsBeginChannelRequest,
  encodeInfoAnswer,
  encodeMcpCallToolAnswer,
  encodeMcpListResourcesAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeMcpReadResourceAnswer,
  encodeSecretsAnswer,
  encodeToolsBeginResponse,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { FrameSocket, MultiplexerError, type Corkable, type Disregard, type Responder, type WebSocketLike } from "@diverge/multiplexer";
import type { Gate } from "../gate.js";
import type { ResolvedProxyOptions } from "../proxy.js";
import { loadDivergeInfo } from "./info.js";
import type { McpOutcome } from "../inward-mcp.js";
import type { SharedInwardMcp } from "../inward-shared.js";
import { DaemonPairs, PostgresPairs, type PairLink } from "./pairs.js";
import { postToProgram } from "./program.js";
import { routeToolsBeginChannelsProviderChannel, type ToolsBeginChannelsProviderRoutes } from "../gen/exchanges.js";
import { FilesystemScopes } from "./filesystem.js";
import { FuseScopes } from "./fuse.js";
import { realRoot } from "../filesystem/index.js";
import type { ContainerProxyRequest } from "@diverge/codec";

/** A handler for every endpoint a scope can be opened for; which tag is which is the codec's business. */
type ScopeRoutes = { readonly [E in ContainerProxyRequest["endpoint"]]: (request: Extract<ContainerProxyRequest, { endpoint: E }>, responder: Responder) => Promise<void> };

const DISREGARDED_KEPT = 1000;
/** Channels whose dropped notifications are counted apart in `stats()`. */
const DROPPED_STREAMS_KEPT = 1000;
/** The Frames-layer header in front of every payload. */
const FRAME_HEADER = 9;

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
  readonly postgres: PostgresPairs;
  readonly daemons: DaemonPairs;
  readonly begin: BeginState = { begun: false };
  /** The last frames disregarded (at most 1000), for logs and tests; `disregardedCount` counts them all. */
  readonly disregarded: Disregard[] = [];
  disregardedCount = 0;
  /** True once the provider has sent its first message. */
  spoken = false;
  private readonly filesystem: FilesystemScopes;
  private readonly fuse: FuseScopes;
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
  /** Open tag-7 channels and the removal of their subscription to the shared inward MCP client. */
  private readonly notificationChannels = new Map<Responder, () => void>();
  private ended = false;
  private unmounted: Promise<void> = Promise.resolve();
  /** Notifications dropped per tag-7 channel, keyed `"/ channel <n>"`; kept after the channel ends. */
  private readonly dropped: Record<string, number> = {};
  private refusedChannels = 0;
  private refusedScopes = 0;
  private oversizedAnswers = 0;

  constructor(
    socket: WebSocketLike,
    private readonly options: ResolvedProxyOptions,
    private readonly gate: Gate,
    private readonly onEnd: (how: ConnectionEnd) => void,
    /** The proxy's one MCP client to the container's server, shared with the paths transport's `/tool/*`. */
    private readonly mcp: SharedInwardMcp,
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
    let root: Promise<string> | undefined;
    this.fuse = new FuseScopes({ frames, root: () => (root ??= realRoot(options.root)), log: options.log });
    this.filesystem = new FilesystemScopes({
      frames,
      // Resolved once, on first use; a root that cannot be resolved fails each request that needs it.
      root: () => (root ??= realRoot(options.root)),
      signal: this.aborter.signal,
      maxWriteBacklogBytes: options.maxPairBacklogBytes,
      // The same counted pause as the pairs': the socket reads again only once no stream holds it.
      flow: () => frames.pauseIncoming(),
      log: options.log,
    });
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
    this.postgres = new PostgresPairs(link, pairOptions);
    this.daemons = new DaemonPairs(link, pairOptions);
  }

  /** Counters of this connection's bounded queues and caps. */
  stats(): { droppedNotifications: Record<string, number>; openChannels: number; refusedChannels: number; refusedScopes: number; oversizedAnswers: number } {
    return {
      droppedNotifications: { ...this.dropped },
      openChannels: this.frames.mux.openTheirChannels,
      refusedChannels: this.refusedChannels,
      refusedScopes: this.refusedScopes,
      oversizedAnswers: this.oversizedAnswers,
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
    for (const unsubscribe of this.notificationChannels.values()) unsubscribe();
    this.notificationChannels.clear();
    this.postgres.closeAll();
    this.daemons.closeAll();
    // Nobody is left to answer the mounts' asks: they go (what waits fails with EIO).
    this.unmounted = this.fuse.closeAll();
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

  /** What each scope the provider opens does. */
  private readonly scopeRoutes: ScopeRoutes = {
    ToolsBegin: (request, responder) => this.onBegin(responder, request.begin),
    FuseMount: (request, responder) => this.fuse.mount(responder, request.request),
    FilesystemTree: (request, responder) => this.filesystem.serve(responder.scope, () => this.filesystem.tree(responder, request.request)),
    FilesystemRead: (request, responder) => this.filesystem.serve(responder.scope, () => this.filesystem.read(responder, request.request)),
    FilesystemWrite: (request, responder) => this.filesystem.serve(responder.scope, () => this.filesystem.write(responder, request.request)),
  };

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
    // A channel on a filesystem scope: a tree's stop, or one nobody opens (ignored, never answered).
    if (this.filesystem.channel(responder)) return;
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
    routeToolsBeginChannelsProviderChannel(request, this.channelRoutes, responder);
  }

  /** What each channel the provider opens does; which tag is which is the generated routing's business. */
  private readonly channelRoutes: ToolsBeginChannelsProviderRoutes<Responder> = {
    postgres: (request, responder) => this.postgres.providerHalf(request.connection_id, responder),
    daemon: (request, responder) => this.daemons.providerHalf(request.connection_id, responder),
    info: (_request, responder) => this.guard(responder, `channel ${responder.channel}`, this.answerInfo(responder)),
    secrets: (request, responder) => this.guard(responder, `channel ${responder.channel}`, this.feedSecrets(responder, request.values)),
    mcpListTools: (request, responder) => this.relayGuarded(responder, { method: "tools/list", params: request.params }, (outcome) => encodeMcpListToolsAnswer(answerOf(outcome) as never)),
    mcpListResources: (request, responder) => this.relayGuarded(responder, { method: "resources/list", params: request.params }, (outcome) => encodeMcpListResourcesAnswer(answerOf(outcome) as never)),
    mcpCallTool: (request, responder) => this.relayGuarded(responder, { method: "tools/call", params: request.params }, (outcome) => encodeMcpCallToolAnswer(answerOf(outcome) as never)),
    mcpReadResource: (request, responder) => this.relayGuarded(responder, { method: "resources/read", params: request.params }, (outcome) => encodeMcpReadResourceAnswer(answerOf(outcome) as never)),
    mcpNotifications: (_request, responder) => this.guard(responder, `channel ${responder.channel}`, this.subscribe(responder)),
  };

  /** Whatever goes wrong serving one stream ends that stream (with a finish) and nothing else. */
  private guard(responder: Responder, what: string, work: Promise<void>): void {
    work.catch((problem: unknown) => {
      this.options.log(`${what} failed: ${problem instanceof Error ? problem.name : "error"}; finishing it`);
      responder.finish();
    });
  }

  /**
   * Info always describes the file: `[0]` with it, `[1]` when there is none. A file whose answer
   * cannot be sent (larger than the message limit, or unreadable) is not served: a bare finish, which
   * the provider tells apart from `[1]`, and a log line saying why.
   */
  private async answerInfo(responder: Responder): Promise<void> {
    const limit = this.options.maxMessageBytes;
    const outcome = await loadDivergeInfo(this.options.root, { maxBytes: limit, log: this.options.log });
    if (responder.finished) return;
    if (outcome.variant === "NotServed") {
      if (outcome.tooLarge) this.oversizedAnswers++;
      this.options.log(`Info: DIVERGE.md is not served (a bare finish): ${outcome.reason}`);
      return responder.finish();
    }
    const answer = encodeInfoAnswer(outcome.variant === "Info" ? { variant: "Info", info: { frontMatter: outcome.info.frontMatter, body: outcome.info.body } } : { variant: "None" });
    if (answer.length + FRAME_HEADER > limit) {
      this.oversizedAnswers++;
      this.options.log(`Info: DIVERGE.md is not served (a bare finish): its answer is ${answer.length} bytes, larger than the message limit of ${limit}`);
      return responder.finish();
    }
    responder.respond(answer);
    responder.finish();
  }

  private async feedSecrets(responder: Responder, values: Record<string, string>): Promise<void> {
    // The log names how many values, never one of them.
    this.options.log(`feeding ${Object.keys(values).length} secret(s) to the program`);
    const answer = await postToProgram(this.options.appPort, "/secrets", JSON.stringify(values), this.aborter.signal);
    if (answer.ok) {
      responder.respond(encodeSecretsAnswer({ variant: "Fed" }));
      responder.finish();
      this.gate.open();
      return;
    }
    this.options.log(`the program refused the secrets (HTTP ${answer.status ?? "unreachable"})`);
    responder.respond(encodeSecretsAnswer({ variant: "Refused", refusal: answer.error }));
    responder.finish();
  }

  private relayGuarded(responder: Responder, exchange: Parameters<SharedInwardMcp["exchange"]>[0], encode: (outcome: McpOutcome) => Uint8Array): void {
    this.guard(responder, `channel ${responder.channel}`, this.relay(responder, exchange, encode));
  }

  private async relay(responder: Responder, exchange: Parameters<SharedInwardMcp["exchange"]>[0], encode: (outcome: McpOutcome) => Uint8Array): Promise<void> {
    // Held until the program has its secrets; the gate lets exchanges through in arrival order.
    await this.gate.pass();
    if (responder.finished) return;
    const outcome = await this.mcp.exchange(exchange, this);
    let answer: Uint8Array;
    try {
      answer = encode(outcome);
    } catch (problem) {
      // The container's answer cannot be written as JSON (nested too deeply, say): say so instead.
      this.options.log(`the container's ${exchange.method} answer could not be encoded`);
      answer = encode({ error: { code: -32603, message: `the container's answer could not be encoded: ${problem instanceof Error ? problem.name : "error"}` } });
    }
    if (answer.length + FRAME_HEADER > this.options.maxMessageBytes) {
      // The provider could not take it: the container's answer becomes an MCP error that says why.
      this.oversizedAnswers++;
      this.options.log(`the container's ${exchange.method} answer is ${answer.length} bytes, larger than the limit; answering with an error`);
      answer = encode({ error: { code: -32603, message: `the container's answer is ${answer.length} bytes, larger than the message limit of ${this.options.maxMessageBytes}` } });
    }
    responder.respond(answer);
    responder.finish();
  }

  private async subscribe(responder: Responder): Promise<void> {
    await this.gate.pass();
    if (responder.finished) return;
    const stream = `/ channel ${responder.channel}`;
    const drop = () => {
      // One key per channel that dropped, kept after it ends, but only so many: the rest add up under one key.
      const key = stream in this.dropped || Object.keys(this.dropped).length < DROPPED_STREAMS_KEPT ? stream : "/ other channels";
      this.dropped[key] = (this.dropped[key] ?? 0) + 1;
    };
    const subscription = await this.mcp.subscribe({
      origin: this,
      notify: (notification) => {
        if (responder.finished) {
          // The channel ended: its subscription to the shared client goes with it.
          this.notificationChannels.get(responder)?.();
          this.notificationChannels.delete(responder);
          return;
        }
        // A channel that cannot keep pace loses notifications; the count is in the proxy's stats.
        if (this.frames.bufferedAmount > this.options.maxNotificationBacklogBytes) return drop();
        let bytes: Uint8Array;
        try {
          bytes = encodeMcpNotificationsAnswer({ variant: "Notification", notification: notification as never });
        } catch {
          return drop();
        }
        if (bytes.length + FRAME_HEADER > this.options.maxMessageBytes) return drop();
        responder.respond(bytes);
      },
      // The container's server went away and no new session could be made: the channel ends with
      // the error rather than going silent.
      ended: (error) => {
        this.notificationChannels.delete(responder);
        if (responder.finished) return;
        responder.respond(encodeMcpNotificationsAnswer({ variant: "Error", error: error as never }));
        responder.finish();
      },
    });
    if ("error" in subscription) {
      responder.respond(encodeMcpNotificationsAnswer({ variant: "Error", error: subscription.error as never }));
      return responder.finish();
    }
    this.notificationChannels.set(responder, subscription.unsubscribe);
  }
}

function answerOf(outcome: McpOutcome): { variant: "Result"; result: unknown } | { variant: "Error"; error: unknown } {
  return "result" in outcome ? { variant: "Result", result: outcome.result } : { variant: "Error", error: outcome.error };
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
