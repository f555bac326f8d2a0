// A container's tools as an MCP server: whatever transport holds the proxy (begin-scope channels
// 3-7, or the paths transport's /tool/*), its tools and resources are served with the MCP SDK, over
// Streamable HTTP (any number of sessions, all sharing the one connection) or stdio. Only what is
// relayed is advertised; every other method is MCP's method-not-found. Results (with their cursors
// and `isError`) and the container's MCP errors pass through unchanged.
//
// Over HTTP the relayed requests of a session (tools/call, tools/list, resources/list, resources/read)
// and their cancellations take a lean path past the SDK's transport and server: the body's JSON is
// read once and checked as far as routing needs (a JSON-RPC request, the params the exchange carries),
// the params go to the container as they came, and the result's JSON bytes come back into the answer
// unparsed (plain JSON, or an SSE stream when the request asked for progress). The SDK's server was
// the bridge's largest cost per call (its zod parse of every request and result, its web streams);
// initialize, sessions, ping, logging/setLevel, batches and the notification stream stay the SDK's.
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
  SUPPORTED_PROTOCOL_VERSIONS,
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
import { answerJsonRpcError, BodyTooLarge, isJsonContentType, readBodyWithin } from "../../http-serving.js";
import type { RelayedMethod } from "./relayed.js";

export type { RelayedMethod } from "./relayed.js";

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
  /**
   * The lean relay, when the transport has one: `params` as the agent sent them, resolving with the
   * result's JSON bytes as they came (not read into MCP's types); rejects as the methods above do.
   * Without it, the HTTP bridge's lean path asks the method above and writes its result as JSON.
   */
  relay?(method: RelayedMethod, params: Record<string, unknown> | undefined, options?: SourceCallOptions): Promise<Uint8Array>;
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

  /** Relays `ask` with the params' progress token (if any) replaced by one of the hop; the route lasts until it is answered. `send` takes the request's progress. */
  async relay<P extends { _meta?: { progressToken?: string | number } } | undefined, R>(params: P, send: (notification: ServerNotification) => Promise<void>, ask: (params: P) => Promise<R>): Promise<R> {
    const token = params?._meta?.progressToken;
    if (token === undefined || !params) return ask(params);
    const hop = `diverge-serve-tools-${++this.next}`;
    this.routes.set(hop, { token, send });
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

/** The JSON-RPC error an exchange's failure is answered with: the container's MCP error exactly as it is, else an internal error with the message. */
function jsonRpcErrorOf(problem: unknown): { code: number; message: string; data?: unknown } {
  const detail = (problem as { detail?: { variant?: string; error?: { code: number; message: string; data?: unknown } } } | undefined)?.detail;
  if (detail?.variant === "Mcp" && detail.error) return { code: detail.error.code, message: detail.error.message, ...(detail.error.data === undefined ? {} : { data: detail.error.data }) };
  // A request over the proxy's message limit was not sent: the agent's request is what is wrong.
  if (detail?.variant === "TooLarge") return { code: ErrorCode.InvalidRequest, message: (problem as Error).message };
  return { code: ErrorCode.InternalError, message: problem instanceof Error ? problem.message : String(problem) };
}

/** Rethrown so the SDK answers with the error's code, message and data exactly as they are. */
function passThrough(problem: unknown): never {
  const { message, ...rest } = jsonRpcErrorOf(problem);
  throw Object.assign(new Error(message), rest);
}

function toolsServer(source: ToolsSource, options: ServeToolsOptions, progress: ProgressRoutes, resources: boolean): Server {
  // `logging`: the container's `notifications/message` are forwarded (MCP 2025-11-25 requires the
  // capability of whoever sends them); each session's `logging/setLevel` is kept by the SDK and
  // filters what it is sent. `resources` only when the container's server has them.
  const server = new Server(options.serverInfo ?? { name: "diverge-serve-tools", version: "2.3.0" }, {
    capabilities: resources ? { tools: { listChanged: true }, resources: { listChanged: true }, logging: {} } : { tools: { listChanged: true }, logging: {} },
  });
  const sender = (extra: RequestHandlerExtra<ServerRequest, ServerNotification>) => (notification: ServerNotification) => extra.sendNotification(notification);
  server.setRequestHandler(ListToolsRequestSchema, (request, extra) => progress.relay(request.params, sender(extra), (params) => source.listTools(params, { signal: extra.signal })).catch(passThrough));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => progress.relay(request.params, sender(extra), (params) => source.callTool(params, { signal: extra.signal })).catch(passThrough));
  if (resources) {
    server.setRequestHandler(ListResourcesRequestSchema, (request, extra) => progress.relay(request.params, sender(extra), (params) => source.listResources(params, { signal: extra.signal })).catch(passThrough));
    server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => progress.relay(request.params, sender(extra), (params) => source.readResource(params, { signal: extra.signal })).catch(passThrough));
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

type RequestId = string | number;

/** One JSON-RPC message as the lean path reads it: enough to route it, nothing read into MCP's types. */
type LeanMessage =
  | { readonly kind: "request"; readonly id: RequestId; readonly method: string; readonly params: Record<string, unknown> | undefined }
  | { readonly kind: "notification"; readonly method: string; readonly params: Record<string, unknown> | undefined }
  /** A batch or a response: the SDK's transport reads it. */
  | { readonly kind: "sdk" }
  | { readonly kind: "invalid"; readonly reason: string };

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** What `body` (one parsed request body) is, as JSON-RPC 2.0 and MCP shape it: -32600 when it is no JSON-RPC message. */
function readLeanMessage(body: unknown): LeanMessage {
  if (Array.isArray(body)) return { kind: "sdk" };
  if (!isPlainObject(body)) return { kind: "invalid", reason: "the body is not a JSON-RPC message (a JSON object)" };
  if (body.jsonrpc !== "2.0") return { kind: "invalid", reason: 'the message\'s "jsonrpc" is not "2.0"' };
  if (!("method" in body)) {
    if ("id" in body && ("result" in body || "error" in body)) return { kind: "sdk" };
    return { kind: "invalid", reason: 'the message has no "method" and is no response (no "id" with "result" or "error")' };
  }
  const { method, params, id } = body;
  if (typeof method !== "string") return { kind: "invalid", reason: 'the message\'s "method" is not a string' };
  if (params !== undefined && !isPlainObject(params)) return { kind: "invalid", reason: 'the message\'s "params" is not an object' };
  if (!("id" in body)) return { kind: "notification", method, params };
  if (typeof id !== "string" && !Number.isSafeInteger(id)) return { kind: "invalid", reason: 'the request\'s "id" is neither a string nor an integer' };
  return { kind: "request", id: id as RequestId, method, params };
}

/** Why `params` cannot be the params of `method` (-32602), as far as the exchange's frame needs them; undefined when they can. */
function paramsProblem(method: RelayedMethod, params: Record<string, unknown> | undefined): string | undefined {
  const meta = params?._meta;
  if (meta !== undefined) {
    if (!isPlainObject(meta)) return `Invalid ${method} request: params._meta is not an object`;
    const token = meta.progressToken;
    if (token !== undefined && typeof token !== "string" && !Number.isSafeInteger(token)) return `Invalid ${method} request: params._meta.progressToken is neither a string nor an integer`;
  }
  switch (method) {
    case "tools/call":
      if (typeof params?.name !== "string") return "Invalid tools/call request: params.name is not a string";
      if (params.arguments !== undefined && !isPlainObject(params.arguments)) return "Invalid tools/call request: params.arguments is not an object";
      return undefined;
    case "resources/read":
      return typeof params?.uri === "string" ? undefined : "Invalid resources/read request: params.uri is not a string";
    default:
      return params?.cursor === undefined || typeof params.cursor === "string" ? undefined : `Invalid ${method} request: params.cursor is not a string`;
  }
}

/** Why the SDK's transport would refuse this POST's headers (status, message), as it words it; undefined when it would not. */
function leanHeaderProblem(request: IncomingMessage): { status: number; message: string } | undefined {
  const accept = request.headers.accept;
  if (!accept?.includes("application/json") || !accept.includes("text/event-stream")) return { status: 406, message: "Not Acceptable: Client must accept both application/json and text/event-stream" };
  if (!isJsonContentType(request.headers["content-type"])) return { status: 415, message: "Unsupported Media Type: Content-Type must be application/json" };
  const header = request.headers["mcp-protocol-version"];
  const version = Array.isArray(header) ? header.join(", ") : header;
  if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
    return { status: 400, message: `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")})` };
  }
  return undefined;
}

const RESULT_END = Buffer.from("}");
const SSE_DATA = Buffer.from("event: message\ndata: ");
const SSE_END = Buffer.from("\n\n");

/**
 * One relayed request's HTTP answer, as the SDK's transport would give it: plain JSON, or (for a
 * request that asked for progress) an SSE stream of its progress and then its answer.
 */
class LeanAnswer {
  private streaming = false;
  constructor(
    private readonly response: ServerResponse,
    private readonly sessionId: string,
    private readonly id: RequestId,
    private readonly stream: boolean,
  ) {}

  /** A notification of the request (its progress): an SSE event. */
  notify(message: object): void {
    if (this.response.writableEnded) return;
    this.open();
    this.response.write(Buffer.concat([SSE_DATA, Buffer.from(JSON.stringify(message)), SSE_END]));
  }

  result(json: Uint8Array): void {
    this.answer(Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(this.id)},"result":`), json);
  }

  error(error: { code: number; message: string; data?: unknown }): void {
    this.answer(Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(this.id)},"error":`), Buffer.from(JSON.stringify(error)));
  }

  /** Cancelled: no answer (as MCP asks), the stream ended. */
  end(): void {
    if (this.response.writableEnded) return;
    this.open();
    this.response.end();
  }

  private answer(head: Buffer, value: Uint8Array): void {
    if (this.response.writableEnded) return;
    if (!this.stream) {
      const body = Buffer.concat([head, value, RESULT_END]);
      this.response.writeHead(200, { "content-type": "application/json", "mcp-session-id": this.sessionId, "content-length": body.length }).end(body);
      return;
    }
    this.open();
    // An SSE data line ends at a line break; one in JSON is whitespace between tokens (a string holds
    // none unescaped), so it is written as a space.
    this.response.end(Buffer.concat([SSE_DATA, head, withoutLineBreaks(value), RESULT_END, SSE_END]));
  }

  private open(): void {
    if (this.streaming) return;
    this.streaming = true;
    this.response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive", "x-accel-buffering": "no", "mcp-session-id": this.sessionId });
  }
}

function withoutLineBreaks(json: Uint8Array): Uint8Array {
  if (!json.includes(0x0a) && !json.includes(0x0d)) return json;
  return json.map((byte) => (byte === 0x0a || byte === 0x0d ? 0x20 : byte));
}

/** A typed method's answer as the lean path writes it: its JSON. */
async function relayTyped(source: ToolsSource, method: RelayedMethod, params: Record<string, unknown> | undefined, options: SourceCallOptions): Promise<Uint8Array> {
  const result =
    method === "tools/call"
      ? await source.callTool(params as CallToolRequest["params"], options)
      : method === "tools/list"
        ? await source.listTools(params, options)
        : method === "resources/list"
          ? await source.listResources(params, options)
          : await source.readResource(params as ReadResourceRequest["params"], options);
  return Buffer.from(JSON.stringify(result));
}

/** One --serve-tools session over HTTP: the SDK's server and transport, and the relayed requests in flight (the lean path's). */
interface HttpSession {
  readonly server: Server;
  readonly transport: StreamableHTTPServerTransport;
  readonly relayed: Map<RequestId, AbortController>;
}

/** Serves the container's tools over Streamable HTTP at `http://host:port/mcp`. */
export async function serveToolsHttp(source: ToolsSource, options: ServeToolsHttpOptions): Promise<ServingTools> {
  const log = options.log ?? (() => {});
  const guard: HostGuard = options.guard ?? { hosts: [], origins: [] };
  const maxSessions = options.maxSessions ?? DEFAULT_SERVE_TOOLS_MAX_SESSIONS;
  const sessions = new SessionBook<HttpSession>({
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
  // What the lean path relays: resources only where the SDK's server has their handlers (else -32601 from it).
  let relayedMethods: ReadonlySet<string> = new Set();
  void resources.then((has) => (relayedMethods = new Set(has ? ["tools/call", "tools/list", "resources/list", "resources/read"] : ["tools/call", "tools/list"])));
  const relayOf = (method: RelayedMethod, params: Record<string, unknown> | undefined, options: SourceCallOptions) => (source.relay ? source.relay(method, params, options) : relayTyped(source, method, params, options));

  /** A relayed request of the session, past the SDK: answered here with what the container's server answered. */
  const relayLean = async (session: HttpSession, sessionId: string, response: ServerResponse, id: RequestId, method: RelayedMethod, params: Record<string, unknown> | undefined) => {
    const problem = paramsProblem(method, params);
    const answer = new LeanAnswer(response, sessionId, id, (params?._meta as { progressToken?: unknown } | undefined)?.progressToken !== undefined);
    if (problem) return answer.error({ code: ErrorCode.InvalidParams, message: problem });
    const controller = new AbortController();
    // A second request with an id in flight takes its place, as in the SDK's server.
    session.relayed.set(id, controller);
    const send = async (notification: ServerNotification) => {
      if (!controller.signal.aborted) answer.notify({ jsonrpc: "2.0", ...notification });
    };
    try {
      const json = await progress.relay(params, send, (relayed) => relayOf(method, relayed, { signal: controller.signal }));
      if (controller.signal.aborted) answer.end();
      else answer.result(json);
    } catch (failure) {
      if (controller.signal.aborted) answer.end();
      else answer.error(jsonRpcErrorOf(failure));
    } finally {
      if (session.relayed.get(id) === controller) session.relayed.delete(id);
    }
  };

  /**
   * The session's POST when the lean path takes it (a relayed request, or the cancellation of one);
   * false when it is the SDK's. Refusals are worded as the SDK's transport words them.
   */
  const takeLean = (session: HttpSession, sessionId: string, request: IncomingMessage, response: ServerResponse, body: unknown): boolean => {
    const message = readLeanMessage(body);
    if (message.kind === "sdk") return false;
    if (message.kind === "invalid") {
      jsonError(response, 400, ErrorCode.InvalidRequest, `Invalid Request: ${message.reason}`);
      return true;
    }
    const cancelled = message.kind === "notification" && message.method === "notifications/cancelled" ? session.relayed.get(message.params?.requestId as RequestId) : undefined;
    if (!cancelled && !(message.kind === "request" && relayedMethods.has(message.method))) return false;
    const refusal = leanHeaderProblem(request);
    if (refusal) {
      jsonError(response, refusal.status, -32000, refusal.message);
      return true;
    }
    if (cancelled) {
      cancelled.abort(message.params?.reason);
      response.writeHead(202).end();
      return true;
    }
    if (message.kind === "request") void relayLean(session, sessionId, response, message.id, message.method as RelayedMethod, message.params);
    return true;
  };

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
      if (request.method === "POST" && takeLean(entry.session, sessionId, request, response, body)) return;
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
    const relayed = new Map<RequestId, AbortController>();
    transport.onclose = () => {
      // The session's relayed requests in flight are given up, as the SDK's server gives up its own.
      for (const controller of relayed.values()) controller.abort();
      relayed.clear();
      if (sessions.remove(entry)) log(...logEvent(`MCP session {session} closed (${sessions.size} open)`, { session: transport.sessionId }));
    };
    const entry = sessions.entry({ server, transport, relayed });
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
