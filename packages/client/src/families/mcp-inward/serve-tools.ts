// A container's tools as an MCP server: whatever transport holds the proxy (begin-scope channels
// 3-7, or the paths transport's /tool/*), its tools and resources are served with the MCP SDK, over
// Streamable HTTP (any number of sessions, all sharing the one connection) or stdio. Only what is
// relayed is advertised; every other method is MCP's method-not-found. Results (with their cursors
// and `isError`) and the container's MCP errors pass through unchanged.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type CallToolRequest,
  type CallToolResult,
  type ListResourcesResult,
  type ListToolsResult,
  type PaginatedRequest,
  type ReadResourceRequest,
  type ReadResourceResult,
  type JSONRPCMessage,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { guardRefusal, SessionBook, type HostGuard } from "@diverge/multiplexer";
import { answerJsonRpcError, BodyTooLarge, readBodyWithin } from "../../http-serving.js";

/**
 * The container's MCP server as a transport reaches it. Each method resolves with the server's result
 * or rejects; an error whose `detail` is `{ variant: "Mcp", error }` is the server's own MCP error and
 * passes through verbatim, any other is an internal error (-32603) with its message.
 */
/** `signal`: the agent cancelled its request (or its session went): the relayed exchange is given up. */
export interface SourceCallOptions {
  readonly signal?: AbortSignal;
}

export interface ToolsSource {
  listTools(params?: PaginatedRequest["params"], options?: SourceCallOptions): Promise<ListToolsResult>;
  listResources(params?: PaginatedRequest["params"], options?: SourceCallOptions): Promise<ListResourcesResult>;
  callTool(params: CallToolRequest["params"], options?: SourceCallOptions): Promise<CallToolResult>;
  readResource(params: ReadResourceRequest["params"], options?: SourceCallOptions): Promise<ReadResourceResult>;
  /** Every notification the container's server sends from now on; the loop ends or throws when the stream does. */
  notifications(): AsyncIterable<ServerNotification> & { close(): void };
}

/** Where a progress token of the transport's hop leads: the agent's request and its own token. */
interface ProgressRoute {
  readonly token: string | number;
  readonly send: (notification: ServerNotification) => Promise<void>;
}

/**
 * The agents' progress tokens on the transport's hop. Every session chooses its own tokens (two
 * sessions may both use 1), and the container's notifications come back on one stream: each relayed
 * request carries a token unique on the hop instead, and that token's progress goes to the request
 * that asked, with the agent's own token.
 */
class ProgressRoutes {
  private readonly routes = new Map<string, ProgressRoute>();
  private next = 0;

  get size(): number {
    return this.routes.size;
  }

  /** Relays `ask` with the params' progress token (if any) replaced by one of the hop; the route lasts until it is answered. */
  async relay<P extends { _meta?: { progressToken?: string | number } } | undefined, R>(params: P, extra: RequestHandlerExtra<ServerRequest, ServerNotification>, ask: (params: P) => Promise<R>): Promise<R> {
    const token = params?._meta?.progressToken;
    if (token === undefined || !params) return ask(params);
    const hop = `diverge-serve-tools-${++this.next}`;
    this.routes.set(hop, { token, send: (notification) => extra.sendNotification(notification) });
    try {
      const result = await ask({ ...params, _meta: { ...params._meta, progressToken: hop } });
      // The container's progress rides the notification stream, its answer the exchange's own path or
      // channel: let what arrived together with the answer be relayed before the answer goes.
      await new Promise<void>((resolve) => setImmediate(resolve));
      return result;
    } finally {
      this.routes.delete(hop);
    }
  }

  /** Relays progress to the request that asked; false for any other notification. */
  deliver(notification: ServerNotification): boolean {
    if (notification.method !== "notifications/progress") return false;
    const params = notification.params as { progressToken: string | number };
    const route = this.routes.get(String(params.progressToken));
    if (route) route.send({ ...notification, params: { ...params, progressToken: route.token } } as ServerNotification).catch(() => {});
    return true;
  }
}

/** The largest JSON-RPC request body read, in bytes; a larger one is 413, read no further. */
export const MAX_SERVE_TOOLS_BODY_BYTES = 16 * 1024 * 1024;

export interface ServeToolsOptions {
  /** How the server introduces itself. */
  readonly serverInfo?: { readonly name: string; readonly version: string };
  /** Told about what happens (sessions opened and closed, the notification stream's end). */
  readonly log?: Say;
}

export interface ServeToolsHttpOptions extends ServeToolsOptions {
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** Host names and Origins accepted besides the loopback ones (as the proxy's program port). */
  readonly guard?: HostGuard;
  /** Sessions held at once; an `initialize` beyond it takes the place of the oldest quiet session, or gets 503 when every one is busy. Default 100. */
  readonly maxSessions?: number;
  /** A session with no request in flight and no notification stream open is closed after this long, in ms. Default 300 000. */
  readonly sessionIdleMs?: number;
}

/** The default cap of --serve-tools sessions held at once. */
export const DEFAULT_SERVE_TOOLS_MAX_SESSIONS = 100;
/** The default idle time after which a quiet --serve-tools session is closed, in ms. */
export const DEFAULT_SERVE_TOOLS_IDLE_MS = 300_000;

export interface ServingTools {
  /** Where the MCP endpoint is: `http://host:port/mcp` (HTTP only). */
  readonly url?: string;
  /** Sessions open now. */
  readonly sessions: number;
  /**
   * Stdio only: resolves once the session is over by the agent's doing (stdin ended or closed, as an
   * agent ends a stdio MCP server), after the server has closed; the caller then stops, exit code 0.
   */
  readonly ended?: Promise<void>;
  close(): Promise<void>;
}

/** Rethrown so the SDK answers with the error's code, message and data exactly as they are. */
function passThrough(problem: unknown): never {
  const detail = (problem as { detail?: { variant?: string; error?: { code: number; message: string; data?: unknown } } } | undefined)?.detail;
  if (detail?.variant === "Mcp" && detail.error) throw Object.assign(new Error(detail.error.message), { code: detail.error.code, ...(detail.error.data === undefined ? {} : { data: detail.error.data }) });
  throw Object.assign(new Error(problem instanceof Error ? problem.message : String(problem)), { code: ErrorCode.InternalError });
}

function toolsServer(source: ToolsSource, options: ServeToolsOptions, progress: ProgressRoutes, resources: boolean): Server {
  // `logging`: the container's `notifications/message` are forwarded (MCP 2025-11-25 requires the
  // capability of whoever sends them); each session's `logging/setLevel` is kept by the SDK and
  // filters what it is sent. `resources` only when the container's server has them.
  const server = new Server(options.serverInfo ?? { name: "diverge-serve-tools", version: "2.3.0" }, {
    capabilities: resources ? { tools: { listChanged: true }, resources: { listChanged: true }, logging: {} } : { tools: { listChanged: true }, logging: {} },
  });
  server.setRequestHandler(ListToolsRequestSchema, (request, extra) => progress.relay(request.params, extra, (params) => source.listTools(params, { signal: extra.signal })).catch(passThrough));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => progress.relay(request.params, extra, (params) => source.callTool(params, { signal: extra.signal })).catch(passThrough));
  if (resources) {
    server.setRequestHandler(ListResourcesRequestSchema, (request, extra) => progress.relay(request.params, extra, (params) => source.listResources(params, { signal: extra.signal })).catch(passThrough));
    server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => progress.relay(request.params, extra, (params) => source.readResource(params, { signal: extra.signal })).catch(passThrough));
  }
  return server;
}

/** How long the bridge waits, at its start, to learn whether the container's server has resources. */
export const RESOURCES_PROBE_MS = 10_000;

/**
 * Whether the container's server has resources: asked once (`resources/list`), bounded. Only MCP's
 * method-not-found (-32601, the server declares no resources) says no; any other outcome (an answer,
 * an error of another kind, no answer in time) advertises them, as before.
 */
async function probeResources(source: ToolsSource, log: Say): Promise<boolean> {
  try {
    await source.listResources(undefined, { signal: AbortSignal.timeout(RESOURCES_PROBE_MS) });
    return true;
  } catch (problem) {
    const code = (problem as { detail?: { variant?: string; error?: { code?: number } } } | undefined)?.detail;
    if (code?.variant === "Mcp" && code.error?.code === ErrorCode.MethodNotFound) {
      log("the container's MCP server has no resources: none are advertised");
      return false;
    }
    return true;
  }
}

/** One session as the notification relay sees it: its transport, and its server (for the log level it set). */
interface RelaySession {
  readonly transport: Transport;
  readonly server: Server;
}

/**
 * Reads the container's notifications once for every session; returns the stop. Progress goes to
 * the request that asked for it; everything else (list changes, log messages, resource updates) to
 * every session, as sent: no capability check of the SDK's server stands between the container's
 * notification and the agent. A session with no notification stream open (its GET) misses what is
 * not tied to one of its requests (no replay).
 */
function relayNotifications(source: ToolsSource, sessions: () => Iterable<RelaySession>, progress: ProgressRoutes, log: Say): () => void {
  let stream: ReturnType<ToolsSource["notifications"]> | undefined;
  let stopped = false;
  try {
    stream = source.notifications();
  } catch (problem) {
    log(...logEvent("the container's notifications are not relayed: {error}", { error: problem instanceof Error ? problem.message : String(problem) }));
    return () => {};
  }
  void (async () => {
    try {
      for await (const notification of stream) {
        // A cancellation names a request of another hop: it goes nowhere.
        if (progress.deliver(notification) || notification.method === "notifications/cancelled") continue;
        const message = { jsonrpc: "2.0", ...notification } as JSONRPCMessage;
        for (const { transport, server } of sessions()) {
          // A log message goes as the SDK sends one: not to a session whose logging/setLevel is above it.
          if (notification.method === "notifications/message") void server.sendLoggingMessage(notification.params as never, transport.sessionId).catch(() => {});
          else void transport.send(message).catch(() => {});
        }
      }
      if (!stopped) log("the container's notification stream ended");
    } catch (problem) {
      if (!stopped) log(...logEvent("the container's notification stream ended: {error}", { error: problem instanceof Error ? problem.message : String(problem) }));
    }
  })();
  return () => {
    stopped = true;
    stream?.close();
  };
}

/** Serves the container's tools on stdin/stdout: one session. Logs must go to stderr only. */
export async function serveToolsStdio(source: ToolsSource, options: ServeToolsOptions & { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {}): Promise<ServingTools> {
  const log = options.log ?? (() => {});
  const progress = new ProgressRoutes();
  const server = toolsServer(source, options, progress, await probeResources(source, log));
  const stdin = options.stdin ?? process.stdin;
  const transport = new StdioServerTransport(stdin as never, options.stdout as never);
  let open = true;
  const closed = new Promise<void>((resolve) => (server.onclose = () => ((open = false), resolve())));
  const stop = relayNotifications(source, () => (open ? [{ transport, server }] : []), progress, log);
  // The SDK's stdio transport does not watch its stdin's end: the agent closing it ends the session
  // here, as every stdio MCP server ends (the SDK's StdioClientTransport closes stdin, then waits).
  let ending: Promise<void> | undefined;
  const end = (): Promise<void> =>
    (ending ??= (async () => {
      stdin.off("end", onEnd);
      stdin.off("close", onEnd);
      stop();
      await server.close().catch(() => {});
      await closed;
    })());
  let sawEnd: () => void = () => {};
  const ended = new Promise<void>((resolve) => (sawEnd = resolve));
  const onEnd = () => {
    log("stdin closed: the MCP session is over");
    void end().then(sawEnd);
  };
  stdin.once("end", onEnd);
  stdin.once("close", onEnd);
  await server.connect(transport);
  return {
    get sessions() {
      return open ? 1 : 0;
    },
    ended,
    close: end,
  };
}

/** Serves the container's tools over Streamable HTTP at `http://host:port/mcp`. */
export async function serveToolsHttp(source: ToolsSource, options: ServeToolsHttpOptions): Promise<ServingTools> {
  const log = options.log ?? (() => {});
  const guard: HostGuard = options.guard ?? { hosts: [], origins: [] };
  const maxSessions = options.maxSessions ?? DEFAULT_SERVE_TOOLS_MAX_SESSIONS;
  const sessions = new SessionBook<{ server: Server; transport: StreamableHTTPServerTransport }>({
    idleMs: options.sessionIdleMs ?? DEFAULT_SERVE_TOOLS_IDLE_MS,
    maxSessions,
    release: (session, why) => {
      log(...logEvent(`MCP session {session} closed: {why} (${sessions.size} open)`, { session: session.transport.sessionId, why }));
      void session.server.close().catch(() => {});
    },
  });
  const progress = new ProgressRoutes();
  const stop = relayNotifications(source, () => sessions.sessions(), progress, log);
  // Learnt once, at the start; an initialize waits for it (bounded by RESOURCES_PROBE_MS).
  const resources = probeResources(source, log);

  const jsonError = (response: ServerResponse, status: number, code: number, message: string, close = false) => answerJsonRpcError(response, status, code, message, { close });

  const readBody = async (request: IncomingMessage): Promise<unknown> => {
    const bytes = await readBodyWithin(request, MAX_SERVE_TOOLS_BODY_BYTES);
    try {
      return JSON.parse(bytes.toString("utf8"));
    } catch {
      throw new SyntaxError("the request body is not JSON");
    }
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const refusal = guardRefusal(guard, request.headers);
    if (refusal) return jsonError(response, 403, ErrorCode.InvalidRequest, refusal, true);
    const pathname = new URL(request.url ?? "/", "http://localhost").pathname;
    if (pathname !== "/mcp") return jsonError(response, 404, ErrorCode.InvalidRequest, `nothing is served at ${pathname}; the MCP endpoint is /mcp`);
    const header = request.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = await readBody(request);
      } catch (problem) {
        if (problem instanceof BodyTooLarge) return jsonError(response, 413, ErrorCode.InvalidRequest, problem.message, true);
        return jsonError(response, 400, ErrorCode.ParseError, (problem as Error).message);
      }
    }
    if (sessionId !== undefined) {
      const entry = sessions.get(sessionId);
      if (!entry) return jsonError(response, 404, ErrorCode.InvalidRequest, "Session not found");
      sessions.track(entry, request.method, response);
      return entry.session.transport.handleRequest(request, response, body);
    }
    if (request.method !== "POST" || !isInitializeRequest(body)) return jsonError(response, 400, ErrorCode.InvalidRequest, "Bad Request: no session id, and not an initialize request");
    if (!sessions.makeRoom()) {
      return jsonError(response, 503, ErrorCode.InternalError, `all ${maxSessions} sessions are busy (the limit of --serve-tools-max-sessions); close one, or try again later`);
    }
    const server = toolsServer(source, options, progress, await resources);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.add(id, entry);
        log(...logEvent(`MCP session {session} opened (${sessions.size} open)`, { session: id }));
      },
      onsessionclosed: (id) => {
        if (sessions.remove(entry)) log(...logEvent(`MCP session {session} closed (${sessions.size} open)`, { session: id }));
      },
    });
    transport.onclose = () => {
      if (sessions.remove(entry)) log(...logEvent(`MCP session {session} closed (${sessions.size} open)`, { session: transport.sessionId }));
    };
    const entry = sessions.entry({ server, transport });
    await server.connect(transport);
    sessions.track(entry, request.method, response);
    await transport.handleRequest(request, response, body);
  };

  const http: HttpServer = createServer((request, response) => {
    handle(request, response).catch((problem: unknown) => jsonError(response, 500, ErrorCode.InternalError, problem instanceof Error ? problem.message : String(problem)));
  });
  http.on("clientError", (_error, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.port, options.host ?? "127.0.0.1", () => {
      http.off("error", reject);
      resolve();
    });
  });
  http.on("error", (error) => log(...logEvent("--serve-tools listener: {error}", { error: error.message })));
  const address = http.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/mcp`,
    get sessions() {
      return sessions.size;
    },
    async close() {
      stop();
      const open = sessions.clear();
      await Promise.allSettled(open.map((session) => session.server.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** `host:port` of --serve-tools; the host must be given (127.0.0.1 for loopback). */
export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port > 65535) return undefined;
  return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
}
