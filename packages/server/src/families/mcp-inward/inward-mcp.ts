// Inward MCP: the provider's exchanges relayed to the container's own MCP server over Streamable HTTP.
// The MCP SDK's client holds the session (initialize, the notification stream, its end); each relayed
// exchange is POSTed on it directly (lean-post.ts), which costs a fraction of the SDK's request path.
// One session at a time, made on first use and made again whenever the
// server loses it, as MCP requires: an HTTP 404 to a request of the session ("session not found"), a
// refused connection, a lost notification stream (the SDK's GET stream). Open notification
// subscriptions carry over to the new session; when no new session can be made they end with the error.
import http from "node:http";
import https from "node:https";
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  ErrorCode,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  McpError,
  ProgressNotificationSchema,
  ReadResourceResultSchema,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { perRequestSignalFetch, type WatchedFetch } from "@diverge/multiplexer";
import { leanPost, type LeanSession } from "./lean-post.js";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../listener.js";

/** A JSON-RPC error object, as relayed in a `[1]` answer. */
export interface ErrorData {
  code: number;
  message: string;
  data?: unknown;
}

export type McpOutcome = { readonly result: unknown } | { readonly error: ErrorData };

export type InwardExchange =
  | { readonly method: "tools/list"; readonly params: object | null }
  | { readonly method: "resources/list"; readonly params: object | null }
  | { readonly method: "tools/call"; readonly params: object }
  | { readonly method: "resources/read"; readonly params: object };

const RESULT_SCHEMAS = {
  "tools/list": ListToolsResultSchema,
  "resources/list": ListResourcesResultSchema,
  "tools/call": CallToolResultSchema,
  "resources/read": ReadResourceResultSchema,
} as const;

/** Resumptions of one closed SSE stream tried before the call is given up (the MCP SDK's default). */
export const RESUME_RETRIES = 2;
/** The MCP SDK's default reconnection options (StreamableHTTPClientTransport); the server's `retry` field replaces the delays. */
const RECONNECTION = { initialReconnectionDelay: 1000, maxReconnectionDelay: 30_000, reconnectionDelayGrowFactor: 1.5, maxRetries: RESUME_RETRIES } as const;

/** How an exchange may be given up by whoever asked it. */
export interface ExchangeOptions {
  /** Aborted when the asker is gone (its path closed, its connection ended): the call is cancelled at the server and answered -32603 with the reason. */
  readonly signal?: AbortSignal;
}

/** Waits before each attempt to make a new session for open subscriptions; after the last, they end. */
export const RENEW_DELAYS_MS = [100, 400, 1000] as const;

/** One notification subscription: a tag-7 channel, or a `/tool/notifications` path. */
export interface InwardListener {
  /**
   * Whose channel it is (the begin scope's connection; `/tool/*`'s one key). Progress of an exchange
   * goes only to the subscriptions of the exchange's own `origin`: the provider on the begin scope and
   * a provider on `/tool/*` each choose their tokens, and may choose the same ones.
   */
  readonly origin?: object;
  notify(notification: ServerNotification): void;
  /** The subscription ended because the server could not be reached again; nothing more comes. */
  ended?(error: ErrorData): void;
}

class Session implements LeanSession {
  readonly client: Client;
  readonly fetch: WatchedFetch;
  private readonly transport: StreamableHTTPClientTransport;
  /** The relayed calls' own connections (keep-alive), closed with the session. */
  readonly agent: http.Agent;
  /** Relayed calls in flight, each stopped when the session closes. */
  private readonly calls = new Set<(error: Error) => void>();
  private nextCall = 0;
  /** Progress of relayed calls by their token (this hop's, the call's id), wherever it arrives. */
  private readonly progress = new Map<string, (progress: Record<string, unknown>) => void>();
  retryMs: number | undefined;
  ready!: Promise<Session>;
  /** Requests of this session not yet answered. */
  inFlight = 0;
  /** No longer the current session: closed once its requests are answered. */
  retired = false;
  /** Why the session was given up while requests were in flight (they end with -32603 saying so). */
  failure: string | undefined;

  constructor(
    readonly url: URL,
    readonly maxMessageBytes: number,
    private readonly onLost: (session: Session, why: string) => void,
    onNotification: (notification: ServerNotification) => void,
    private readonly onFailed: (session: Session, why: string) => void,
  ) {
    this.agent = new (url.protocol === "https:" ? https.Agent : http.Agent)({ keepAlive: true });
    this.client = new Client({ name: "diverge-proxy", version: "2.3.0" });
    // A server answering as JSON sends a call's progress on the session's notification stream: it is
    // the relayed call's, whose token the SDK's client did not make (it would drop it).
    this.client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, ...progress } = notification.params;
      if (typeof progressToken === "string") this.progress.get(progressToken)?.(progress);
    });
    this.client.fallbackNotificationHandler = async (notification) => {
      // The JSON-RPC envelope is not part of the notification: `method` and `params` only.
      const { method, params } = notification as { method: string; params?: unknown };
      onNotification((params === undefined ? { method } : { method, params }) as ServerNotification);
    };
    // Transport errors are handled where they surface (a failed request, a lost stream); the SDK also
    // reports them here. One matters: the SDK gave up resuming a request's SSE stream (its retries
    // with Last-Event-ID all failed), after which the request would wait for good.
    this.client.onerror = (error) => {
      if (/^Maximum reconnection attempts/.test(error.message)) this.unresumable();
    };
    this.client.onclose = () => onLost(this, "the session closed");
    // The session's one notification stream (the SDK's GET without Last-Event-ID): its end means the
    // server went away or forgot the session, and a new session is made.
    const standalone = perRequestSignalFetch({
      bodyEnded: () => onLost(this, "its notification stream ended"),
      responded: (_method, status) => {
        if (status === 404) onLost(this, "the server answered 404 (session not found)");
      },
    });
    // Everything else: the POSTs, and the GETs with Last-Event-ID that resume a POST's SSE stream the
    // server closed (MCP 2025-11-25's polling): their end is the SDK's business (it resumes again).
    const requests = perRequestSignalFetch({
      responded: (method, status) => {
        if (status === 404 && method !== "DELETE") onLost(this, "the server answered 404 (session not found)");
      },
    });
    const dispatch = (input: string | URL, init?: RequestInit): Promise<Response> => {
      const method = (init?.method ?? "GET").toUpperCase();
      if (method !== "GET") return requests(input, init);
      if (new Headers(init?.headers).has("last-event-id")) return requests(input, init);
      // A retired session's notification stream is not opened again (the SDK's reconnection of it):
      // 405 is MCP's "no notification stream here", which the SDK takes quietly.
      if (this.retired) return Promise.resolve(new Response(null, { status: 405 }));
      return standalone(input, init);
    };
    this.fetch = Object.assign(dispatch, { inFlight: () => standalone.inFlight() + requests.inFlight() });
    // The SDK's default reconnection (the MCP SDK's own defaults, the server's `retry` first): a POST
    // stream the server closed after a priming event is resumed with Last-Event-ID.
    this.transport = new StreamableHTTPClientTransport(url, { fetch: this.fetch, reconnectionOptions: RECONNECTION });
    this.ready = this.client.connect(this.transport).then(() => this);
  }

  /**
   * One request of the session, sent past the SDK's client (lean-post.ts): the result checked
   * against the method's type as the SDK's client checks it, the errors the ones it throws.
   */
  async request(request: { method: InwardExchange["method"]; params?: Record<string, unknown> }, onprogress: ((progress: Record<string, unknown>) => void) | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    // Ids of their own, apart from the SDK's numbers (its initialize and pings share the session).
    const id = `diverge-${this.nextCall++}`;
    const params = onprogress ? { ...request.params, _meta: { ...(request.params?._meta as object | undefined), progressToken: id } } : request.params;
    const body = JSON.stringify(params === undefined ? { jsonrpc: "2.0", id, method: request.method } : { jsonrpc: "2.0", id, method: request.method, params });
    if (onprogress) this.progress.set(id, onprogress);
    try {
      const result = await leanPost(this, { id, body, onprogress, signal, retries: RESUME_RETRIES, delay: reconnectionDelay }, this.calls);
      return RESULT_SCHEMAS[request.method].parse(result);
    } catch (error) {
      // Given up by the asker: the server is told, as the SDK's client tells it.
      if (signal?.aborted) void this.client.notification({ method: "notifications/cancelled", params: { requestId: id, reason: String(signal.reason) } }).catch(() => {});
      throw error;
    } finally {
      this.progress.delete(id);
    }
  }

  headers(): Record<string, string> {
    const headers: Record<string, string> = {};
    const { sessionId } = this.transport;
    const version = (this.transport as { protocolVersion?: string }).protocolVersion;
    if (sessionId) headers["mcp-session-id"] = sessionId;
    if (version) headers["mcp-protocol-version"] = version;
    return headers;
  }

  /** A server's message on a relayed call's stream that is not the call's: the SDK's client answers it (a ping, a request it does not serve) or takes it (a notification). */
  other(message: unknown): void {
    this.transport.onmessage?.(message as never);
  }

  notFound(): void {
    this.onLost(this, "the server answered 404 (session not found)");
  }

  unresumable(): void {
    this.onFailed(this, `the container's MCP server closed the call's SSE stream and the stream could not be resumed (Last-Event-ID, ${RESUME_RETRIES} attempts)`);
  }

  close(): Promise<void> {
    for (const stop of [...this.calls]) stop(new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
    this.agent.destroy();
    return this.client.close().catch(() => {});
  }
}

/** The SDK's reconnection delay: the server's `retry` when it sent one, else growing from the initial delay. */
function reconnectionDelay(attempt: number, serverRetryMs: number | undefined): number {
  if (serverRetryMs !== undefined) return serverRetryMs;
  return Math.min(RECONNECTION.initialReconnectionDelay * RECONNECTION.reconnectionDelayGrowFactor ** attempt, RECONNECTION.maxReconnectionDelay);
}

export class InwardMcp {
  private session: Session | undefined;
  private readonly listeners = new Set<InwardListener>();
  private closed = false;
  private renewTimer: ReturnType<typeof setTimeout> | undefined;
  private renewAttempt = 0;
  /** Every session not yet closed (the current one and retired ones with requests in flight). */
  private readonly open = new Set<Session>();

  constructor(
    private readonly url: URL,
    private readonly log: Say,
    /** The proxy's message limit: answers past twice it are not read (lean-post.ts). */
    private readonly maxMessageBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
  ) {}

  /** Sessions made so far (the first counts), for tests and logs. */
  sessionsMade = 0;

  /**
   * Relays one exchange; the container's error comes back as itself, anything else as -32603. A
   * progress token in `params._meta` is replaced on this hop by one the SDK makes unique per session;
   * the server's progress comes back with the provider's own token to the subscriptions of the
   * exchange's `origin` (to every subscription when it has none).
   */
  async exchange(exchange: InwardExchange, origin?: object, options: ExchangeOptions = {}): Promise<McpOutcome> {
    const { signal } = options;
    const params = exchange.params as { _meta?: { progressToken?: unknown } } | null;
    const token = params?._meta?.progressToken;
    const onprogress =
      typeof token === "string" || typeof token === "number"
        ? (progress: Record<string, unknown>) => this.deliver({ method: "notifications/progress", params: { ...progress, progressToken: token } } as ServerNotification, origin)
        : undefined;
    const request = params === null ? { method: exchange.method } : { method: exchange.method, params: params as Record<string, unknown> };
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) return { error: givenUp(exchange.method, signal) };
      let session: Session;
      try {
        // A session being made (its initialize, bounded by the SDK's 60 s) is waited for only as
        // long as the asker waits.
        session = await untilAborted(this.current(), signal);
      } catch (error) {
        if (signal?.aborted) return { error: givenUp(exchange.method, signal) };
        return { error: unreachable(this.url, error) };
      }
      if (signal?.aborted) return { error: givenUp(exchange.method, signal) };
      session.inFlight++;
      try {
        // No timeout: the protocol has none, and a long tool call is not cut here. The asker bounds it:
        // its signal cancels the call at the server (notifications/cancelled); a stream that cannot be
        // resumed ends it (the session is given up).
        const result = await session.request(request as never, onprogress, signal);
        return { result };
      } catch (error) {
        if (signal?.aborted) return { error: givenUp(exchange.method, signal) };
        if (session.failure !== undefined) return { error: { code: ErrorCode.InternalError, message: session.failure } };
        if (!isTransportFailure(error)) return { error: errorDataOf(error) };
        // The connection or the session failed: this session is not to be trusted again.
        this.lost(session, error instanceof StreamableHTTPError ? `HTTP ${error.code}` : "its connection failed");
        // Sent again once, on a new session, only when the server cannot have acted on it.
        if (attempt > 0 || !notDelivered(error)) return { error: this.closed ? closing() : errorDataOf(error) };
      } finally {
        session.inFlight--;
        if (session.retired && session.inFlight === 0) this.shut(session);
      }
    }
  }

  /** Subscribes to the server's notifications; answers with the error data when it cannot be reached. */
  async subscribe(listener: InwardListener | ((notification: ServerNotification) => void)): Promise<{ readonly error: ErrorData } | { readonly unsubscribe: () => void }> {
    const entry: InwardListener = typeof listener === "function" ? { notify: listener } : listener;
    try {
      await this.current();
    } catch (error) {
      return { error: this.closed ? closing() : unreachable(this.url, error) };
    }
    this.listeners.add(entry);
    return { unsubscribe: () => this.listeners.delete(entry) };
  }

  /** Aborts whatever is pending (a connect, requests in flight) and ends the session. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.renewTimer);
    this.listeners.clear();
    this.session = undefined;
    const sessions = [...this.open];
    this.open.clear();
    await Promise.allSettled(sessions.map((session) => session.client.close()));
  }

  /** Subscriptions open now. */
  get subscriptions(): number {
    return this.listeners.size;
  }

  /** To every subscription, or to those of `origin` only (progress). */
  private deliver(notification: ServerNotification, origin?: object): void {
    for (const listener of this.listeners) if (origin === undefined || listener.origin === origin) listener.notify(notification);
  }

  private current(): Promise<Session> {
    if (this.closed) return Promise.reject(new Error("the proxy is closing"));
    if (this.session) return this.session.ready;
    const session = new Session(
      this.url,
      this.maxMessageBytes,
      (lost, why) => this.lost(lost, why),
      (notification) => {
        if (this.session === session) this.deliver(notification);
      },
      (failed, why) => this.fail(failed, why),
    );
    this.session = session;
    this.open.add(session);
    this.sessionsMade++;
    session.ready.then(
      () => {
        if (this.closed) return this.shut(session);
        this.log(`inward MCP session open at ${this.url.href}`);
      },
      () => this.lost(session, "it could not be opened"),
    );
    return session.ready;
  }

  /** The session is gone or stale: the next use makes a new one, and open subscriptions are moved. */
  private lost(session: Session, why: string): void {
    if (session.retired) return;
    session.retired = true;
    if (session.inFlight === 0) this.shut(session);
    if (this.session !== session) return;
    this.session = undefined;
    if (this.closed) return;
    this.log(...logEvent("inward MCP session lost: {why}", { why }));
    if (this.listeners.size > 0) this.scheduleRenew();
  }

  /** A stream of the session could not be resumed: the session is given up now, its requests in flight end with `why`. */
  private fail(session: Session, why: string): void {
    if (session.failure !== undefined) return;
    session.failure = why;
    this.log(...logEvent("inward MCP: {why}; the session is given up", { why }));
    this.lost(session, why);
    if (this.open.delete(session)) void session.close();
  }

  private shut(session: Session): void {
    if (!this.open.delete(session)) return;
    session.close();
  }

  private scheduleRenew(): void {
    if (this.renewTimer !== undefined || this.closed) return;
    const delay = RENEW_DELAYS_MS[Math.min(this.renewAttempt, RENEW_DELAYS_MS.length - 1)]!;
    this.renewTimer = setTimeout(() => {
      this.renewTimer = undefined;
      if (this.closed || this.listeners.size === 0) return;
      this.current().then(
        () => {
          this.renewAttempt = 0;
          this.log(`inward MCP: ${this.listeners.size} notification subscription(s) moved to a new session`);
        },
        (error: unknown) => {
          if (this.closed) return;
          this.renewAttempt++;
          if (this.renewAttempt < RENEW_DELAYS_MS.length) return this.scheduleRenew();
          this.renewAttempt = 0;
          const data = unreachable(this.url, error);
          this.log(`inward MCP: ending ${this.listeners.size} notification subscription(s): the server cannot be reached`);
          const ending = [...this.listeners];
          this.listeners.clear();
          for (const listener of ending) listener.ended?.(data);
        },
      );
    }, delay);
  }
}

/** The server never saw the request: its session was unknown (404), or no connection was made. */
function notDelivered(error: unknown): boolean {
  if (error instanceof StreamableHTTPError) return error.code === 404;
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return code === "ECONNREFUSED";
}

/**
 * A failure of the HTTP exchange or of the session (an HTTP error status, a refused or reset
 * connection, the SDK's "connection closed"), not the server's own MCP error nor a local one (a
 * request the SDK could not even write, say).
 */
function isTransportFailure(error: unknown): boolean {
  if (error instanceof StreamableHTTPError) return true;
  if (error instanceof McpError) return error.code === ErrorCode.ConnectionClosed && /^MCP error -32000: Connection closed$/.test(error.message);
  if (error instanceof TypeError && error.message === "fetch failed") return true;
  return typeof (error as { cause?: { code?: unknown } } | undefined)?.cause?.code === "string";
}

/** `promise`, or a rejection as soon as `signal` fires (the promise itself goes on). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    promise.then(
      (value) => (signal.removeEventListener("abort", abort), resolve(value)),
      (error: unknown) => (signal.removeEventListener("abort", abort), reject(error)),
    );
  });
}

/** The asker gave the exchange up (its signal): -32603 with the reason, when it is one a caller can read. */
function givenUp(method: string, signal: AbortSignal): ErrorData {
  const reason = signal.reason as unknown;
  const why = typeof reason === "string" ? reason : reason instanceof Error && reason.name !== "AbortError" ? reason.message : "the asker cancelled it";
  return { code: ErrorCode.InternalError, message: `the ${method} exchange was given up before the container's MCP server answered: ${why}` };
}

function closing(): ErrorData {
  return { code: ErrorCode.InternalError, message: "the proxy is closing" };
}

function unreachable(url: URL, error: unknown): ErrorData {
  return { code: ErrorCode.InternalError, message: `the container's MCP server at ${url.href} could not be reached: ${error instanceof Error ? error.message : String(error)}` };
}

const SDK_PREFIX = /^MCP error -?\d+: /;

/** The error as the server sent it: the SDK prefixes its message, which is taken off again. */
export function errorDataOf(error: unknown): ErrorData {
  if (error instanceof McpError) {
    const data: ErrorData = { code: error.code, message: error.message.replace(SDK_PREFIX, "") };
    if (error.data !== undefined) data.data = error.data;
    return data;
  }
  const issues = (error as { issues?: unknown } | undefined)?.issues;
  if (Array.isArray(issues)) {
    // The SDK's check of the result (a schema error, whose own message is its issues as JSON): say which part.
    const first = issues[0] as { path?: unknown[]; message?: string } | undefined;
    const where = first?.path && first.path.length > 0 ? first.path.join(".") : "the result";
    return { code: ErrorCode.InternalError, message: `the container's MCP server answered with a result not of its type (${where}: ${first?.message ?? "invalid"})` };
  }
  if (error instanceof SyntaxError) return { code: ErrorCode.InternalError, message: `the container's MCP server's answer could not be read: ${error.message}` };
  if (error instanceof TypeError && error.message === "fetch failed") {
    // undici's cause (ECONNRESET, UND_ERR_SOCKET, …) is what tells an operator which way it broke.
    const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
    const why = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : undefined;
    return { code: ErrorCode.InternalError, message: `the connection to the container's MCP server was lost before it answered (fetch failed${why ? `: ${why}` : ""}); the call is not sent again` };
  }
  return { code: ErrorCode.InternalError, message: error instanceof Error ? error.message : String(error) };
}
