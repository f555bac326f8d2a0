// The provider's side of the multiplexed connection to one container's proxy: the tools::begin
// scope, the asks the provider makes on it, and the connections the proxy announces.
import { DEFAULT_MAX_MESSAGE_BYTES } from "../limits.js";
import {
  decodeToolsBeginResponse,
  decodeToolsBeginServerChannelRequest,
  encodeContainerProxyRequest,
  encodeToolsBeginChannelRequest,
  DecodeError,
  type CallToolRequestParams,
  type PaginatedRequestParams,
  type ReadResourceRequestParams,
  type ToolsBeginChannelRequest,
  type ToolsBeginServerChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { FrameSocket, speakRevision, type Corkable, type Responder, type SpokenRevision, type WebSocketLike } from "@diverge/multiplexer";
import type { CallToolResult, ListResourcesResult, ListToolsResult, ReadResourceResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { WebSocket as NodeWebSocket } from "ws";
import { endpointUrl, proxyBase } from "../url.js";
import { emptyReadFlowStats, readOn, treeOn, writeOn, type FilesystemHost, type ReadFlowStats, type ReadOptions, type TransferOptions, type TreeOptions, type TreeStream } from "../filesystem/multiplexed.js";
import type { WriteSource } from "../filesystem/queue.js";
import { mountOn, type MountOptions, type ProviderMount } from "../filesystem/mount.js";
import type { FuseHandlers } from "@diverge/multiplexer/fuse";
import { bounded, type RequestOptions } from "../waiting.js";
import { pipePostgres, type DatabaseAddress } from "./postgres.js";
import { bindProviderAsks, dispatchToolsBeginChannelsProxyChannel, type DispatchedAsk, type ProviderAsks, type ProviderHandlers } from "../gen/exchanges.js";
import type { ChannelOutcome } from "../exchanges/engine.js";
import { channelAskEngine } from "./channel-engine.js";

/** A JSON-RPC error object as the container's MCP server sent it. */
export interface ErrorData {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

export type ContainerErrorDetail =
  /** The proxy finished the scope or channel with nothing before the finish. */
  | { readonly variant: "NotServed"; readonly what: string }
  /** The begin or the secrets feed was refused; `error` is the refusal's JSON. */
  | { readonly variant: "Refused"; readonly what: string; readonly error: unknown }
  /** The container's MCP server answered with an error. */
  | { readonly variant: "Mcp"; readonly what: string; readonly error: ErrorData }
  /**
   * The connection ended, or the proxy ended the tools::begin scope (it does so when it is ending),
   * before the answer finished or before the ask was made.
   */
  | { readonly variant: "Lost"; readonly what: string }
  /** The answer's bytes did not decode. */
  | { readonly variant: "Unreadable"; readonly what: string; readonly reason: string }
  /** An ask that needs `Begun` was made before it. */
  | { readonly variant: "NotBegun"; readonly what: string }
  /** No answer within `timeoutMs`; `waitingFor` says what was awaited (and why it may be held). */
  | { readonly variant: "TimedOut"; readonly what: string; readonly waitingFor: string; readonly timeoutMs: number }
  /** The caller's signal aborted the wait. */
  | { readonly variant: "Aborted"; readonly what: string; readonly waitingFor: string; readonly reason: unknown }
  /** The proxy refused `/` with 409: it has had its one provider connection (a proxy takes one in its life). */
  | { readonly variant: "AlreadyConnected"; readonly what: string; readonly url: string }
  /** The proxy could not be reached, or refused the upgrade for another reason. */
  | { readonly variant: "Unreachable"; readonly what: string; readonly url: string; readonly status: number | undefined; readonly reason: string };

export class ContainerError extends Error {
  override readonly name = "ContainerError";
  constructor(readonly detail: ContainerErrorDetail) {
    super(describe(detail));
  }
  get variant(): ContainerErrorDetail["variant"] {
    return this.detail.variant;
  }
}

function describe(detail: ContainerErrorDetail): string {
  switch (detail.variant) {
    case "NotServed":
      return `${detail.what}: not served`;
    case "Refused":
      return `${detail.what}: refused: ${JSON.stringify(detail.error)}`;
    case "Mcp":
      return `${detail.what}: MCP error ${detail.error.code}: ${detail.error.message}`;
    case "Lost":
      return `${detail.what}: the connection (or the proxy's tools::begin scope) ended before the answer`;
    case "Unreadable":
      return `${detail.what}: unreadable answer: ${detail.reason}`;
    case "NotBegun":
      return `${detail.what}: the container has not begun (call beginTools first)`;
    case "TimedOut":
      return `${detail.what}: no answer within ${detail.timeoutMs} ms; waiting for ${detail.waitingFor}`;
    case "Aborted":
      return `${detail.what}: aborted while waiting for ${detail.waitingFor}${detail.reason instanceof Error ? `: ${detail.reason.message}` : ""}`;
    case "AlreadyConnected":
      return `${detail.what}: the proxy's one multiplexed connection (${detail.url}, HTTP 409) is already used, by an earlier command even one whose begin was refused, and a proxy takes one connection on / in its life: restart the proxy (its container), or hold the connection with \`diverge connect\``;
    case "Unreachable":
      return `${detail.what}: could not open ${detail.url}${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
  }
}

/** A connection the proxy announced: a program's database driver or daemon connection. */
export interface AnnouncedConnection {
  readonly kind: "postgres" | "daemon";
  /** The id the proxy minted; the provider's half quotes it. */
  readonly id: number;
  /**
   * Opens the provider's half. `data` receives what the program sent (driver bytes, or one daemon
   * client frame per call); `end` is called once that half finishes (`served` false: the proxy did not
   * know the id) or the connection ends. A handler that throws ends the pair (reported as `pairFailed`).
   */
  accept(handlers: { data(bytes: Uint8Array): void; end(served: boolean): void }): PairHalf;
  /** Declines the connection: the proxy closes the program's socket. */
  decline(): void;
}

/** The provider's end of an accepted pair. */
export interface PairHalf {
  /** Sends bytes to the program (what the database says, or one daemon server frame). */
  send(bytes: Uint8Array): void;
  /** Ends the proxy's half: the database or daemon closed the connection. */
  end(): void;
  /** Bytes waiting in the connection's send buffer, for backpressure. */
  readonly bufferedAmount: number;
  drained(lowWater: number): Promise<void>;
  /** Stops reading the connection until the returned function is called. */
  pauseIncoming(): () => void;
}

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

/**
 * The front matter of `DIVERGE.md`: the members this project reads, typed, and every other member kept
 * as the file has it.
 */
export interface DivergeFrontMatter {
  readonly title?: string;
  readonly summary?: string;
  /** A JSON Schema of what the begin's `arguments` may be. */
  readonly arguments?: Record<string, unknown>;
  /** The names of the secrets the program needs fed before it serves MCP. */
  readonly secrets?: readonly string[];
  readonly [member: string]: unknown;
}

/** The container's `DIVERGE.md`, parsed by the proxy. */
export interface ContainerInfo {
  readonly frontMatter: DivergeFrontMatter;
  /** The front matter exactly as the proxy sent it, including a known member of another type (left out of `frontMatter`). */
  readonly rawFrontMatter: Readonly<Record<string, unknown>>;
  /** The Markdown after the front matter. */
  readonly body: string;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** What happened on the connection besides the answers to the provider's own asks. */
export type MultiplexedConnectionEvent =
  /** The proxy announced a program's database or daemon connection. */
  | { readonly type: "announced"; readonly kind: "postgres" | "daemon"; readonly id: number }
  /** An announced connection was declined (no handler, no `database`, or the handler declined it). */
  | { readonly type: "declined"; readonly kind: "postgres" | "daemon"; readonly id: number; readonly reason: string }
  /** A pair failed: the database could not be reached, a handler threw or rejected. Never thrown. */
  | { readonly type: "pairFailed"; readonly kind: "postgres" | "daemon"; readonly id: number; readonly error: Error }
  /**
   * The first MCP exchange asked before the secrets were fed (reported once). A proxy with the secrets gate (the
   * default) holds it until `feedSecrets` resolves; `feedSecrets({})` opens it for a program that
   * declares none.
   */
  | { readonly type: "heldForSecrets"; readonly what: string }
  /** A `notifications()` iterator whose loop did not keep pace lost its oldest notifications. */
  | { readonly type: "notificationsDropped"; readonly dropped: number }
  /**
   * An answer on a proxy-opened channel was larger than the proxy's message limit (`maxMessageBytes`),
   * so it was not sent: the proxy would close the whole connection on it (close 1009). The channel is
   * finished with what was sent before it; with nothing, that is a bare finish (not served).
   */
  | { readonly type: "answerNotSent"; readonly channel: number; readonly reason: string }
  /** The WebSocket closed. */
  | { readonly type: "ended"; readonly code: number };

export interface OpenContainerOptions extends RequestOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** The WebSocket implementation; default `ws`. */
  readonly WebSocket?: WebSocketConstructor;
  /**
   * Where the program's database connections go: a `postgres://` URL or `{host, port}` (e.g. an
   * embedded PGlite behind `@electric-sql/pglite-socket`). Every announced database connection is
   * piped there; a failure is a `pairFailed` event. Ignored when `onPostgres` is given.
   */
  readonly database?: string | DatabaseAddress;
  /**
   * Called for every database connection the proxy announces; without it (and without `database`)
   * each is declined. What it throws or its promise rejects with is a `pairFailed` event.
   */
  readonly onPostgres?: (connection: AnnouncedConnection) => unknown;
  /** Called for every daemon connection the proxy announces; without it each is declined. As `onPostgres` for failures. */
  readonly onDaemon?: (connection: AnnouncedConnection) => unknown;
  /**
   * Answers the exchanges the proxy asks on the begin scope (the vault, once begun), the same
   * generated handlers `connectProxy` takes for `/requests`. A channel no handler answers is declined.
   */
  readonly handlers?: ProviderHandlers;
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
const FRAME_HEADER_BYTES = 9;

export interface NotificationsOptions {
  /** Notifications kept for a loop that does not pull; older ones beyond it are dropped. Default 1024. */
  readonly maxQueued?: number;
  /** Ends the stream as `close()` does: the loop ends normally. */
  readonly signal?: AbortSignal;
}

export interface NotificationStream extends AsyncIterable<ServerNotification> {
  /** Stops delivering to this iterator; its loop ends. The connection's one notification channel stays for the others. */
  close(): void;
}

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

function failures(what: string, waitingFor: () => string) {
  return {
    timedOut: (timeoutMs: number) => new ContainerError({ variant: "TimedOut", what, waitingFor: waitingFor(), timeoutMs }),
    aborted: (reason: unknown) => new ContainerError({ variant: "Aborted", what, waitingFor: waitingFor(), reason }),
  };
}

/** The connection's one notification channel, shared by every `notifications()` iterator. */
interface NotificationHub {
  readonly sinks: Set<NotificationSinkState>;
  ended: boolean;
}

interface NotificationSinkState {
  push(notification: ServerNotification): void;
  fail(error: ContainerError): void;
  end(): void;
}

/** The provider's side of the multiplexed connection (path `/`) to one container's proxy. */
export class MultiplexedConnection {
  readonly frames: FrameSocket;
  private beginScope: number | undefined;
  private scopeEnded = false;
  private secretsFed = false;
  private heldReported = false;
  private readonly endWaiters: (() => void)[] = [];
  private hasEnded = false;
  private hub: NotificationHub | undefined;
  private readonly listeners = new Set<(event: MultiplexedConnectionEvent) => void>();
  readonly mcp: ContainerMcp;
  /** @internal The generated typed asks of the channels the provider opens on the begin scope, on this connection's channels. */
  readonly asks: ProviderAsks;
  private readonly scopeChannels = new Map<number, (responder: Responder, payload: Uint8Array) => void>();
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
    this.mcp = new ContainerMcp(this);
    this.asks = bindProviderAsks(
      channelAskEngine<ToolsBeginChannelRequest>({
        encode: encodeToolsBeginChannelRequest,
        open: (payload, handlers) => void this.frames.mux.openChannel(this.channelScope("channel"), payload, handlers),
      }),
    );
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
      let begun = false;
      const opened = this.frames.mux.openScope(encodeContainerProxyRequest({ endpoint: "ToolsBegin", begin }), {
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

  private endScope(scope: number): void {
    if (this.beginScope !== scope) return;
    this.beginScope = undefined;
    this.scopeEnded = true;
  }

  /** The container's `DIVERGE.md`, parsed; undefined when the image has none. */
  async info(options?: RequestOptions): Promise<ContainerInfo | undefined> {
    const answer = await this.askChannel("info", () => this.asks.info({}), options, () => "the proxy's reading of DIVERGE.md");
    if (answer.variant !== "Info") return undefined;
    return typedInfo(answer.info);
  }

  /** Feeds the secrets' values; resolves on `Fed`, rejects with `Refused` and the program's words. */
  async feedSecrets(values: Record<string, string>, options?: RequestOptions): Promise<void> {
    const answer = await this.askChannel("secrets", () => this.asks.secrets({ values }), options, () => "the program's POST /secrets answer");
    if (answer.variant === "Refused") throw new ContainerError({ variant: "Refused", what: "secrets", error: answer.refusal });
    this.secretsFed = true;
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
    return this.secretsFed
      ? `the container's MCP server to answer ${what} through the proxy`
      : `the container's MCP server to answer ${what} through the proxy; the secrets were never fed, and a proxy with the secrets gate (the default) holds every MCP exchange until feedSecrets resolves`;
  }

  /** @internal Reports the first MCP exchange asked before the secrets were fed. */
  noteMcpAsk(what: string): void {
    if (this.secretsFed || this.beginScope === undefined || this.heldReported) return;
    this.heldReported = true;
    this.emit({ type: "heldForSecrets", what });
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
            return reject(this.lostError(what));
          case "unreadable":
            return reject(new ContainerError({ variant: "Unreadable", what, reason: outcome.reason }));
        }
      }, reject);
    });
  }

  private lostError(what: string): ContainerError {
    return new ContainerError({ variant: "Lost", what });
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
    this.frames.mux.openChannel(this.channelScope(what), encodeToolsBeginChannelRequest(request), handlers);
  }

  /** @internal Subscribes a sink to the connection's one notification channel, opening it when none is open. */
  subscribeNotifications(sink: NotificationSinkState): () => void {
    let hub = this.hub;
    if (!hub || hub.ended) {
      const fresh: NotificationHub = { sinks: new Set(), ended: false };
      const what = "notifications";
      let errorSeen = false;
      const finishAll = (each: (sink: NotificationSinkState) => void) => {
        fresh.ended = true;
        if (this.hub === fresh) this.hub = undefined;
        for (const member of [...fresh.sinks]) each(member);
        fresh.sinks.clear();
      };
      // Throws (NotBegun, Lost) before anything is kept.
      this.channelScope(what);
      this.asks.mcpNotifications({}).listen({
        answer: (answer) => {
          if (fresh.ended) return;
          if (answer.variant === "Notification") {
            for (const member of fresh.sinks) member.push(answer.notification as ServerNotification);
          } else {
            errorSeen = true;
            const failure = new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
            finishAll((member) => member.fail(failure));
          }
        },
        unreadable: (reason) => {
          if (fresh.ended) return;
          const failure = new ContainerError({ variant: "Unreadable", what, reason });
          for (const member of fresh.sinks) member.fail(failure);
        },
        end: (ending) => {
          if (ending.type === "lost") {
            const failure = this.lostError(what);
            finishAll((member) => member.fail(failure));
          } else if (ending.type === "bareFinish" && !errorSeen) {
            const failure = new ContainerError({ variant: "NotServed", what });
            finishAll((member) => member.fail(failure));
          } else finishAll((member) => member.end());
        },
      });
      this.hub = hub = fresh;
    }
    const current = hub;
    current.sinks.add(sink);
    return () => current.sinks.delete(sink);
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
    if (request.variant === "Postgres" || request.variant === "Daemon") {
      const kind = request.variant === "Postgres" ? "postgres" : "daemon";
      const id = request.connection_id;
      const announced = this.announced(kind, id, responder);
      this.emit({ type: "announced", kind, id });
      const handler = kind === "postgres" ? (this.options.onPostgres ?? this.databaseHandler()) : this.options.onDaemon;
      if (!handler) {
        announced.decline();
        this.emit({ type: "declined", kind, id, reason: kind === "postgres" ? "no onPostgres handler and no database option" : "no onDaemon handler" });
        return;
      }
      const failed = (error: unknown) => {
        announced.decline();
        announced.failed(error);
      };
      try {
        const outcome = handler(announced);
        if (outcome && typeof (outcome as PromiseLike<unknown>).then === "function") (outcome as PromiseLike<unknown>).then(undefined, failed);
      } catch (error) {
        failed(error);
      }
      return;
    }
    // Every other channel carries an exchange: the generated dispatch finds its handler.
    const dispatched = this.options.handlers && dispatchToolsBeginChannelsProxyChannel(request, this.options.handlers);
    if (!dispatched) return responder.finish();
    void this.answerChannel(responder, dispatched);
  }

  /** Sends a dispatched exchange's answer messages on the channel, then its finish (bare when none). */
  private async answerChannel(responder: Responder, dispatched: DispatchedAsk): Promise<void> {
    const controller = new AbortController();
    try {
      for await (const bytes of dispatched.answer({ channel: responder.channel, path: `/ channel ${responder.channel}`, signal: controller.signal })) {
        if (responder.finished) {
          controller.abort();
          break;
        }
        const limit = this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
        if (bytes.length + FRAME_HEADER_BYTES > limit) {
          this.emit({ type: "answerNotSent", channel: responder.channel, reason: `the answer is ${bytes.length + FRAME_HEADER_BYTES} bytes, larger than the proxy's message limit of ${limit}` });
          break;
        }
        responder.respond(bytes);
      }
    } catch {
      // A handler that fails answers what it had sent so far; with nothing sent, that is not served.
    } finally {
      controller.abort();
      responder.finish();
    }
  }

  private databaseHandler(): ((connection: AnnouncedConnection) => unknown) | undefined {
    const database = this.options.database;
    if (database === undefined) return undefined;
    return (connection) => pipePostgres(connection, database);
  }

  private announced(kind: "postgres" | "daemon", id: number, proxyHalf: Responder): AnnouncedConnection & { failed(error: unknown): void } {
    const connection = this;
    let decided = false;
    let declined = false;
    let reported = false;
    let half: { end(): void } | undefined;
    const failed = (error: unknown) => {
      if (reported) return;
      reported = true;
      connection.emit({ type: "pairFailed", kind, id, error: error instanceof Error ? error : new Error(String(error)) });
    };
    return {
      kind,
      id,
      failed,
      decline() {
        if (!decided) {
          decided = true;
          declined = true;
          proxyHalf.finish();
          return;
        }
        // After an accept, declining ends the proxy's half.
        if (!declined) half?.end();
      },
      accept(handlers) {
        if (decided) throw new Error(`${kind} connection ${id} was already accepted or declined`);
        decided = true;
        const tag = kind === "postgres" ? ({ variant: "Postgres", connection_id: id } as const) : ({ variant: "Daemon", connection_id: id } as const);
        let ended = false;
        const end = (served: boolean) => {
          if (ended) return;
          ended = true;
          try {
            handlers.end(served);
          } catch (error) {
            failed(error);
          }
        };
        try {
          connection.openChannel(`${kind} connection ${id}`, tag, {
            response: (bytes) => {
              if (ended) return;
              try {
                handlers.data(bytes);
              } catch (error) {
                failed(error);
                proxyHalf.finish();
                end(true);
              }
            },
            finish: (served) => end(served),
            lost: () => end(false),
          });
        } catch (error) {
          queueMicrotask(() => end(false));
          if (!(error instanceof ContainerError)) failed(error);
        }
        half = {
          end: () => proxyHalf.finish(),
        };
        return {
          send: (bytes) => proxyHalf.respond(bytes),
          end: () => proxyHalf.finish(),
          get bufferedAmount() {
            return connection.frames.bufferedAmount;
          },
          drained: (lowWater) => connection.frames.drained(lowWater),
          pauseIncoming: () => connection.frames.pauseIncoming(),
        };
      },
    };
  }
}

/** The five MCP exchanges with the container's own MCP server. */
export class ContainerMcp {
  constructor(private readonly connection: MultiplexedConnection) {}

  private ask<T>(what: string, ask: () => Promise<ChannelOutcome<{ variant: "Result"; result: unknown } | { variant: "Error"; error: unknown }>>, options: RequestOptions | undefined): Promise<T> {
    this.connection.noteMcpAsk(what);
    return this.connection.askChannel(what, ask, options, () => this.connection.mcpWaitingFor(what)).then((answer) => resultOf(what, answer) as T);
  }

  listTools(params?: PaginatedRequestParams, options?: RequestOptions): Promise<ListToolsResult> {
    return this.ask("tools/list", () => this.connection.asks.mcpListTools({ params: params ?? null }), options);
  }

  listResources(params?: PaginatedRequestParams, options?: RequestOptions): Promise<ListResourcesResult> {
    return this.ask("resources/list", () => this.connection.asks.mcpListResources({ params: params ?? null }), options);
  }

  callTool(params: CallToolRequestParams, options?: RequestOptions): Promise<CallToolResult> {
    return this.ask("tools/call", () => this.connection.asks.mcpCallTool({ params }), options);
  }

  readResource(params: ReadResourceRequestParams, options?: RequestOptions): Promise<ReadResourceResult> {
    return this.ask("resources/read", () => this.connection.asks.mcpReadResource({ params }), options);
  }

  /**
   * Every notification the container's MCP server sends from now on, in order. Every iterator shares
   * the connection's one notification channel (opened by the first). The loop throws ContainerError
   * `Lost` when the connection drops, `Mcp` when the server's stream ends with an error; it ends
   * normally after `close()`. Throws at once (ContainerError) when there is no begun scope to ask on.
   */
  notifications(options: NotificationsOptions = {}): NotificationStream {
    const maxQueued = Math.max(1, options.maxQueued ?? 1024);
    const connection = this.connection;
    const queue: ServerNotification[] = [];
    let failure: ContainerError | undefined;
    let done = false;
    let wake: (() => void) | undefined;
    const signal = () => {
      wake?.();
      wake = undefined;
    };
    connection.noteMcpAsk("notifications");
    const unsubscribe = connection.subscribeNotifications({
      push: (notification) => {
        if (done) return;
        queue.push(notification);
        if (queue.length > maxQueued) {
          queue.shift();
          connection.emit({ type: "notificationsDropped", dropped: 1 });
        }
        signal();
      },
      fail: (error) => {
        if (done) return;
        failure ??= error;
        done = true;
        signal();
      },
      end: () => {
        done = true;
        signal();
      },
    });
    const close = () => {
      if (!done) failure = undefined;
      done = true;
      queue.length = 0;
      unsubscribe();
      options.signal?.removeEventListener("abort", close);
      signal();
    };
    if (options.signal?.aborted) close();
    else options.signal?.addEventListener("abort", close, { once: true });
    return {
      close,
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            if (queue.length > 0) {
              yield queue.shift()!;
              continue;
            }
            if (failure) throw failure;
            if (done) return;
            await new Promise<void>((resolve) => (wake = resolve));
          }
        } finally {
          unsubscribe();
          options.signal?.removeEventListener("abort", close);
        }
      },
    };
  }
}

function declaredTools(tools: unknown): DeclaredTool[] {
  if (!Array.isArray(tools)) return [];
  return tools.filter((tool): tool is DeclaredTool => typeof tool === "object" && tool !== null && typeof (tool as { name?: unknown }).name === "string");
}

function typedInfo(info: Record<string, unknown>): ContainerInfo {
  const raw = typeof info.frontMatter === "object" && info.frontMatter !== null && !Array.isArray(info.frontMatter) ? (info.frontMatter as Record<string, unknown>) : {};
  const frontMatter: Record<string, unknown> = { ...raw };
  // A member of a known name but another type is kept out of the typed view; rawFrontMatter has it.
  if (frontMatter.title !== undefined && typeof frontMatter.title !== "string") delete frontMatter.title;
  if (frontMatter.summary !== undefined && typeof frontMatter.summary !== "string") delete frontMatter.summary;
  if (frontMatter.arguments !== undefined && (typeof frontMatter.arguments !== "object" || frontMatter.arguments === null || Array.isArray(frontMatter.arguments))) delete frontMatter.arguments;
  if (frontMatter.secrets !== undefined && !(Array.isArray(frontMatter.secrets) && frontMatter.secrets.every((name) => typeof name === "string"))) delete frontMatter.secrets;
  return { frontMatter: frontMatter as DivergeFrontMatter, rawFrontMatter: raw, body: typeof info.body === "string" ? info.body : "" };
}

function resultOf(what: string, answer: { variant: "Result"; result: unknown } | { variant: "Error"; error: unknown }): unknown {
  if (answer.variant === "Error") throw new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
  return answer.result;
}

function unreadable(what: string, error: unknown): ContainerError {
  if (error instanceof ContainerError) return error;
  if (error instanceof DecodeError) return new ContainerError({ variant: "Unreadable", what, reason: error.message });
  return new ContainerError({ variant: "Unreadable", what, reason: error instanceof Error ? error.message : String(error) });
}

