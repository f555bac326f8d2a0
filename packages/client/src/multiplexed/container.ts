// The provider's side of the multiplexed connection to one container's proxy: the tools::begin
// scope and its bookkeeping, the channels of the provider's on it, and the channels the proxy opens
// (pairs to the pair engine, exchanges to the generated dispatch). What each family asks or answers
// lives in its folder (families/); the methods here delegate to it.
import { DEFAULT_MAX_MESSAGE_BYTES } from "../limits.js";
import {
  decodeToolsBeginResponse,
  decodeToolsBeginServerChannelRequest,
  encodeContainerProxyRequest,
  encodeToolsBeginChannelRequest,
  type ToolsBeginChannelRequest,
  type ToolsBeginServerChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { FrameSocket, speakRevision, type Corkable, type Responder, type SpokenRevision, type WebSocketLike } from "@diverge/multiplexer";
import { WebSocket as NodeWebSocket } from "ws";
import { endpointUrl, proxyBase } from "../url.js";
import type { FuseHandlers } from "@diverge/multiplexer/fuse";
import { bounded, type RequestOptions } from "../waiting.js";
import { bindProviderAsks, dispatchToolsBeginChannelsProxyChannel, type DispatchedAsk, type ProviderAsks, type ProviderHandlers } from "../gen/exchanges.js";
import type { AnswerContext, ChannelAskEngine, ChannelOutcome } from "../exchanges/engine.js";
import { channelAskEngine } from "./channel-engine.js";
import { ContainerError, FRAME_HEADER_BYTES, failures, refuseOversized, unreadable } from "./errors.js";
import type { MultiplexedConnectionEvent } from "./host.js";
import { announcePair } from "./pairs.js";
import type { ProxyHandlers } from "../paths/connect.js";
import {
  askInfo,
  ContainerMcp,
  emptyReadFlowStats,
  feedSecretsOn,
  mountOn,
  NotificationHub,
  pairFamilies,
  readOn,
  SecretsGate,
  treeOn,
  writeOn,
  type ContainerInfo,
  type FilesystemHost,
  type MountOptions,
  type NotificationSinkState,
  type PairOptions,
  type ProviderMount,
  type ReadFlowStats,
  type ReadOptions,
  type TransferOptions,
  type TreeOptions,
  type TreeStream,
  type WriteSource,
  beginAgentOn,
  beginScopeHandlers,
  type Agent,
  type AgentBeginRequest,
  type AgentScopeHost,
} from "../families/index.js";

export { ContainerError, type ContainerErrorDetail, type ErrorData } from "./errors.js";
export type { MultiplexedConnectionEvent } from "./host.js";
export type { AnnouncedConnection, PairHalf } from "./pairs.js";

export interface BeginRequest {
  readonly arguments: unknown;
  readonly image?: { readonly name: string; readonly digest: string };
}

/** A tool the program declared when it took the arguments (the `Begun` answer), as it produced it. */
export interface DeclaredTool {
  /** Unique in the list; the caller's handle for it. */
  readonly name: string;
  readonly image?: { readonly name: string; readonly digest: string };
  /** Bytes of memory the tool container may use. */
  readonly memory?: number;
  /** Bytes the tool container may write. */
  readonly disk?: number;
  /** The arguments to register the tool with. */
  readonly arguments?: unknown;
  readonly instructions?: string;
  readonly [member: string]: unknown;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** `database`, `onPostgres` and `onDaemon` are the pair families' options (families/postgres, families/daemon). */
export interface OpenContainerOptions extends RequestOptions, PairOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** The WebSocket implementation; default `ws`. */
  readonly WebSocket?: WebSocketConstructor;
  /**
   * Answers the exchanges the proxy asks on the begin scope (outward MCP and the vault, once begun):
   * the same handlers `connectProxy` takes for `/requests`, in either shape — the generated one
   * (`mcpCallTool`, …) or the relay's (`relayToMcp(…)`: `callTool`, …). A channel no handler answers
   * is declined.
   */
  readonly handlers?: ProviderHandlers | ProxyHandlers;
  /** Sees every event, from the first. */
  readonly onEvent?: (event: MultiplexedConnectionEvent) => void;
  /**
   * The proxy's message limit (its `--max-message-bytes`), in bytes. An answer whose frame would be
   * larger is not sent (an `answerNotSent` event): the proxy would end the one connection on it.
   * Default 16 MiB, the proxy's default.
   */
  readonly maxMessageBytes?: number;
}

/** The Frames layer's header: type, scope and channel before every payload. */

/**
 * Dials the proxy's `/` (give the proxy's base URL: ws or http, with or without a trailing slash)
 * and resolves once the WebSocket is open. Rejects with ContainerError `AlreadyConnected` when the
 * proxy has had its one connection, `Unreachable` otherwise, or ProxyUrlError for a URL that names
 * another endpoint. `timeoutMs`/`signal` bound the dial.
 */
export async function openContainer(url: string | URL, options: OpenContainerOptions = {}): Promise<MultiplexedConnection> {
  speakRevision(options.revision); // refuse a revision not spoken here before dialling
  const target = endpointUrl(proxyBase(url), "");
  const what = "openContainer";
  const Implementation = options.WebSocket ?? (NodeWebSocket as unknown as WebSocketConstructor);
  let socket: WebSocketLike | undefined;
  let stream: Corkable | undefined;
  await bounded<void>(options, failures(what, () => `the WebSocket to ${target} to open`), (resolve, reject) => {
    try {
      socket = new Implementation(target);
    } catch (problem) {
      reject(new ContainerError({ variant: "Unreachable", what, url: target, status: undefined, reason: problem instanceof Error ? problem.message : String(problem) }));
      return;
    }
    // With `ws`, the upgrade's socket under the WebSocket: the frames of one event-loop turn leave in one write.
    (socket as { once?: (event: string, listener: (response: { socket?: Corkable }) => void) => void }).once?.("upgrade", (response) => (stream = response.socket));
    let lastError = "";
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", (event: { message?: string; error?: Error }) => {
      lastError = event.error?.message ?? event.message ?? lastError;
    });
    socket.addEventListener("close", (event: { code?: number }) => {
      const status = /Unexpected server response: (\d+)/.exec(lastError);
      const code = status ? Number(status[1]) : undefined;
      if (code === 409) reject(new ContainerError({ variant: "AlreadyConnected", what, url: target }));
      else reject(new ContainerError({ variant: "Unreachable", what, url: target, status: code, reason: lastError || `closed with ${event.code ?? 1006} before opening` }));
    });
    return () => {
      // A dial abandoned (timed out, aborted) before it opened is closed at once; an open one is handed over.
      if (socket && socket.readyState === 0) {
        try {
          socket.close();
        } catch {
          socket.addEventListener("open", () => socket!.close(1000));
        }
      }
    };
  });
  return new MultiplexedConnection(socket!, options, stream);
}


/** The provider's side of the multiplexed connection (path `/`) to one container's proxy. */
export class MultiplexedConnection {
  readonly frames: FrameSocket;
  private beginScope: number | undefined;
  private scopeEnded = false;
  private readonly secretsGate = new SecretsGate();
  /** `options.handlers` in the generated shape (beginScopeHandlers), made at the first proxy-opened channel. */
  private beginHandlers: ProviderHandlers | undefined;
  private readonly endWaiters: (() => void)[] = [];
  private hasEnded = false;
  private readonly notificationHub: NotificationHub;
  private readonly listeners = new Set<(event: MultiplexedConnectionEvent) => void>();
  readonly mcp: ContainerMcp;
  /** @internal The generated typed asks of the channels the provider opens on the begin scope, on this connection's channels. */
  readonly asks: ProviderAsks;
  /** @internal The engine `asks` is bound onto: a channel of the begin scope read with another answer codec (the --serve-tools bridge's lean relay). */
  readonly channels: ChannelAskEngine<ToolsBeginChannelRequest>;
  private readonly scopeChannels = new Map<number, (responder: Responder, payload: Uint8Array) => void>();
  /** The agent, when this connection began an agent container (its scope's table is not tools::begin's). */
  private agent: Agent | undefined;
  /** The spec revision this connection speaks. */
  readonly revision: SpokenRevision;
  /** How `read`s held this connection for readers slower than the wire (bytes held, pauses, stalls). */
  readonly readFlow: ReadFlowStats = emptyReadFlowStats();

  constructor(socket: WebSocketLike, private readonly options: OpenContainerOptions = {}, stream?: Corkable) {
    this.revision = speakRevision(options.revision);
    if (options.onEvent) this.listeners.add(options.onEvent);
    // Errors after the open end in a close, which ends every stream; the listener keeps them from being unhandled.
    socket.addEventListener("error", () => {});
    this.frames = new FrameSocket(socket, {
      role: "client",
      stream,
      events: { channel: (responder, payload) => this.onProxyChannel(responder, payload) },
      closed: (code) => {
        this.hasEnded = true;
        for (const resolve of this.endWaiters.splice(0)) resolve();
        this.emit({ type: "ended", code });
      },
    });
    this.notificationHub = new NotificationHub(this);
    this.mcp = new ContainerMcp(this);
    this.channels = channelAskEngine<ToolsBeginChannelRequest>({
      encode: encodeToolsBeginChannelRequest,
      open: (payload, handlers) => {
        const scope = this.toolsScope();
        refuseOversized("tools::begin channel", payload, this.maxMessageBytes);
        this.frames.mux.openChannel(scope, payload, handlers);
      },
    });
    this.asks = bindProviderAsks(this.channels);
  }

  /** Adds an event listener; returns its removal. */
  onEvent(listener: (event: MultiplexedConnectionEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** @internal */
  emit(event: MultiplexedConnectionEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own; the connection goes on.
      }
    }
  }

  /** Whether the WebSocket has closed. */
  get isEnded(): boolean {
    return this.hasEnded;
  }

  /** Resolves when the connection has ended. */
  ended(): Promise<void> {
    if (this.hasEnded) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  /** Opens the tools::begin scope; resolves with the tools the program declared. */
  beginTools(request: BeginRequest, options?: RequestOptions): Promise<DeclaredTool[]> {
    const what = "tools::begin";
    const begin: Record<string, unknown> = { arguments: request.arguments ?? null };
    if (request.image) begin.image = { name: request.image.name, digest: request.image.digest };
    return bounded<DeclaredTool[]>(options, failures(what, () => "the proxy's Begun (the program's POST /register answer)"), (resolve, reject) => {
      if (this.frames.mux.ended) return reject(new ContainerError({ variant: "Lost", what }));
      const payload = encodeContainerProxyRequest({ variant: "ToolsBegin", begin });
      refuseOversized(what, payload, this.maxMessageBytes);
      let begun = false;
      const opened = this.frames.mux.openScope(payload, {
        response: (payload) => {
          try {
            const answer = decodeToolsBeginResponse(payload);
            if (answer.variant === "Begun") {
              begun = true;
              this.beginScope = opened.scope;
              this.scopeEnded = false;
              resolve(declaredTools(answer.tools));
            } else reject(new ContainerError({ variant: "Refused", what, error: answer.error }));
          } catch (error) {
            reject(unreadable(what, error));
          }
        },
        finish: () => {
          if (begun) this.endScope(opened.scope);
          reject(new ContainerError({ variant: "NotServed", what }));
        },
        lost: () => {
          if (begun) this.endScope(opened.scope);
          reject(new ContainerError({ variant: "Lost", what }));
        },
      });
    });
  }

  /**
   * Opens the agents::begin scope of an agent container; resolves with the Agent once the program
   * took the arguments. One begin per connection, whichever family.
   */
  beginAgent(request: AgentBeginRequest, options?: RequestOptions): Promise<Agent> {
    return beginAgentOn(this.agentHost, request, options).then((agent) => (this.agent = agent));
  }

  /** The begin scope, for a channel of tools::begin's table; an agent container's scope has another table. */
  private toolsScope(): number {
    if (this.agent) throw new ContainerError({ variant: "NotBegun", what: "a tool container's channel (this connection began an agent container: use the Agent)" });
    return this.channelScope("channel");
  }

  private get agentHost(): AgentScopeHost {
    return {
      frames: this.frames,
      began: (scope, route) => {
        this.beginScope = scope;
        this.scopeEnded = false;
        this.scopeChannels.set(scope, route);
      },
      endScope: (scope) => {
        this.scopeChannels.delete(scope);
        this.endScope(scope);
      },
      serveProxyChannel: (responder, request, dispatch) => this.serveProxyChannel(responder, request, dispatch),
      maxMessageBytes: this.maxMessageBytes,
      askChannel: (what, ask, options, waitingFor) => this.askChannel(what, ask, options, waitingFor),
    };
  }

  private endScope(scope: number): void {
    if (this.beginScope !== scope) return;
    this.beginScope = undefined;
    this.scopeEnded = true;
  }

  /** The container's `DIVERGE.md`, parsed; undefined when the image has none. */
  info(options?: RequestOptions): Promise<ContainerInfo | undefined> {
    return this.agent ? this.agent.info(options) : askInfo(this, options);
  }

  /** Feeds the secrets' values; resolves on `Fed`, rejects with `Refused` and the program's words. */
  feedSecrets(values: Record<string, string>, options?: RequestOptions): Promise<void> {
    return this.agent ? this.agent.feedSecrets(values, options) : feedSecretsOn(this, this.secretsGate, values, options);
  }

  /**
   * `filesystem::tree`: the container's tree under the proxy's root, a Snapshot first, then one
   * delta per change. Fold the frames with `foldTree`/`LiveTree`; `stop()` (or `break`) ends it.
   */
  tree(options?: TreeOptions): TreeStream {
    return treeOn(this.filesystemHost, options);
  }

  /**
   * `filesystem::read`: the file at `path` (components from the proxy's root) as a byte stream. A
   * reader slower than the wire makes the stream pause the connection past READ_HIGH_WATER; one that
   * takes nothing for `stallMs` (10 s) meanwhile gets `Stalled` and the read is stopped.
   */
  read(path: readonly string[], options?: ReadOptions): ReadableStream<Uint8Array> {
    return readOn(this.filesystemHost, path, options);
  }

  /** `filesystem::write`: replaces the file at `path` with `content` whole, or not at all. */
  write(path: readonly string[], content: WriteSource, options?: TransferOptions): Promise<void> {
    return writeOn(this.filesystemHost, path, content, options);
  }

  /**
   * `fuse::mount`: the proxy mounts a FUSE filesystem at `path` (components from the container's
   * root) and relays every operation there to `target`, typed handlers or a directory of this
   * machine. Resolves once the mount serves; rejects with the proxy's reason.
   */
  mount(path: readonly string[], target: FuseHandlers | string, options?: MountOptions): Promise<ProviderMount> {
    return mountOn(this.filesystemHost, path, target, options);
  }

  private get filesystemHost(): FilesystemHost {
    return {
      frames: this.frames,
      readFlow: this.readFlow,
      routeScopeChannels: (scope, handler) => {
        this.scopeChannels.set(scope, handler);
        return () => this.scopeChannels.delete(scope);
      },
    };
  }

  /** Closes the connection; resolves once it has ended. */
  close(): Promise<void> {
    this.frames.close(1000);
    return this.ended();
  }

  /** @internal What an MCP exchange waits for, with the secrets gate named while the secrets are not fed. */
  mcpWaitingFor(what: string): string {
    return this.secretsGate.waitingFor(what);
  }

  /** @internal An MCP exchange was answered (before a feed: the proxy has no secrets gate). */
  noteMcpAnswered(): void {
    this.secretsGate.answered();
  }

  /** @internal Reports the first MCP exchange asked before the secrets were fed. */
  noteMcpAsk(what: string): void {
    if (this.secretsGate.heldNow(this.beginScope !== undefined)) this.emit({ type: "heldForSecrets", what });
  }

  /**
   * @internal Asks one channel of the begin scope (`ask`: a generated typed ask) and reads its outcome:
   * the answer, or ContainerError `NotServed` (a bare finish), `Lost`, `Unreadable`; `NotBegun`/`Lost`
   * at once when there is no begun scope to ask on.
   */
  askChannel<A>(what: string, ask: () => Promise<ChannelOutcome<A>>, options?: RequestOptions, waitingFor: () => string = () => `the answer to ${what}`): Promise<A> {
    return bounded<A>(options, failures(what, waitingFor), (resolve, reject) => {
      this.channelScope(what);
      ask().then((outcome) => {
        switch (outcome.type) {
          case "answered":
            return resolve(outcome.answer);
          case "bareFinish":
            return reject(new ContainerError({ variant: "NotServed", what }));
          case "lost":
            return reject(new ContainerError({ variant: "Lost", what }));
          case "unreadable":
            return reject(new ContainerError({ variant: "Unreadable", what, reason: outcome.reason }));
        }
      }, reject);
    });
  }

  /** @internal The begin scope to open a channel on. Throws ContainerError (`Lost`, `NotBegun`) when there is none. */
  channelScope(what: string): number {
    if (this.frames.mux.ended) throw new ContainerError({ variant: "Lost", what });
    if (this.scopeEnded && this.beginScope === undefined) throw new ContainerError({ variant: "Lost", what });
    if (this.beginScope === undefined) throw new ContainerError({ variant: "NotBegun", what });
    return this.beginScope;
  }

  /** Opens a channel of the provider's on the begin scope. Throws ContainerError when it cannot. */
  openChannel(what: string, request: ToolsBeginChannelRequest, handlers: { response(payload: Uint8Array): void; finish(served: boolean): void; lost(): void }): void {
    const scope = this.channelScope(what);
    const payload = encodeToolsBeginChannelRequest(request);
    refuseOversized(what, payload, this.maxMessageBytes);
    this.frames.mux.openChannel(scope, payload, handlers);
  }

  /** The proxy's message limit this connection keeps to (`maxMessageBytes`). */
  private get maxMessageBytes(): number {
    return this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** @internal Subscribes a sink to the connection's one notification channel, opening it when none is open. */
  subscribeNotifications(sink: NotificationSinkState): () => void {
    return this.notificationHub.subscribe(sink);
  }

  private onProxyChannel(responder: Responder, payload: Uint8Array): void {
    // A channel on a scope other than the begin scope belongs to that scope's exchange (a write's content).
    const routed = this.scopeChannels.get(responder.scope);
    if (routed) return routed(responder, payload);
    let request: ToolsBeginServerChannelRequest;
    try {
      request = decodeToolsBeginServerChannelRequest(payload, { check: checkMcp });
    } catch {
      // An ask the provider cannot read is answered by a bare finish.
      return responder.finish();
    }
    this.serveProxyChannel(responder, request, (handlers) => dispatchToolsBeginChannelsProxyChannel(request, handlers));
  }

  /** A proxy-opened channel, decoded by its scope's family: a pair's announcement to the pair engine, an exchange to `dispatch`. */
  private serveProxyChannel(responder: Responder, request: { readonly variant: string; readonly connection_id?: number }, dispatch: (handlers: ProviderHandlers) => DispatchedAsk | undefined): void {
    // A channel that announces a pair goes to the pair engine with the family that announces it.
    const pair = pairFamilies.find((family) => family.announcedBy === request.variant);
    if (pair) return announcePair(this, pair, this.options, request.connection_id!, responder);
    // Every other channel carries an exchange: the generated dispatch finds its handler.
    this.beginHandlers ??= this.options.handlers && beginScopeHandlers(this.options.handlers);
    const dispatched = this.beginHandlers && dispatch(this.beginHandlers);
    if (!dispatched) return responder.finish();
    void this.answerChannel(responder, dispatched);
  }

  /** Sends a dispatched exchange's answer messages on the channel, then its finish (bare when none). */
  private async answerChannel(responder: Responder, dispatched: DispatchedAsk): Promise<void> {
    // The signal is made when a handler first looks at it (a vault get never does): an AbortController
    // and its abort (a DOMException with its stack) cost more than the rest of a small answer.
    let controller: AbortController | undefined;
    let ended = false;
    const context: AnswerContext = {
      channel: responder.channel,
      path: `/ channel ${responder.channel}`,
      get signal() {
        if (!controller) {
          controller = new AbortController();
          if (ended) controller.abort();
        }
        return controller.signal;
      },
    };
    try {
      for await (const bytes of dispatched.answer(context)) {
        if (responder.finished) {
          ended = true;
          controller?.abort();
          break;
        }
        const limit = this.maxMessageBytes;
        if (bytes.length + FRAME_HEADER_BYTES > limit) {
          this.emit({ type: "answerNotSent", channel: responder.channel, reason: `the answer is ${bytes.length + FRAME_HEADER_BYTES} bytes, larger than the proxy's message limit of ${limit}` });
          break;
        }
        responder.respond(bytes);
      }
    } catch {
      // A handler that fails answers what it had sent so far; with nothing sent, that is not served.
    } finally {
      ended = true;
      controller?.abort();
      responder.finish();
    }
  }
}

function declaredTools(tools: unknown): DeclaredTool[] {
  if (!Array.isArray(tools)) return [];
  return tools.filter((tool): tool is DeclaredTool => typeof tool === "object" && tool !== null && typeof (tool as { name?: unknown }).name === "string");
}
