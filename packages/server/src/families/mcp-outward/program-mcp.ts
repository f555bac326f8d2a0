// The program-facing side of the outward MCP exchanges: an MCP server (the SDK's, over its Streamable
// HTTP transport) at `/mcp` on the proxy's loopback listener. The program inside the container uses
// any MCP client; its `tools/list`, `resources/list`, `tools/call` and `resources/read` become asks
// on `/requests`, their answers go back to it. The provider's progress reaches the request that asked
// for it; its other notifications reach every live session.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type JSONRPCMessage,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";
import { SessionBook, STREAM_GRACE_MS, type SessionEntry } from "@diverge/multiplexer";
import type { RequestRoute } from "../../listener.js";
import { closeUnlessRead, readBody } from "../../paths/program-http.js";
import { McpExchangeError } from "./errors.js";
import type { McpAsks } from "./asks.js";

type RequestExtra = RequestHandlerExtra<never, never>;

/** The MCP server's own name and version, as `initialize` reports them. */
export const PROGRAM_MCP_SERVER_INFO = { name: "diverge-proxy", version: "2.3.0" } as const;

/**
 * An error the SDK's server sends to the program exactly as built: the SDK copies `code`, `message`
 * and `data` from whatever a handler throws, so the provider's own error passes through untouched.
 */
class ProgramFacingError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** The one MCP outcome each way an exchange can fail. */
export function programErrorOf(problem: unknown): ProgramFacingError {
  if (problem instanceof McpExchangeError) {
    const detail = problem.detail;
    if (detail.variant === "McpError") return new ProgramFacingError(detail.error.code, detail.error.message, detail.error.data);
    return new ProgramFacingError(ErrorCode.InternalError, problem.message, { diverge: detail.variant });
  }
  return new ProgramFacingError(ErrorCode.InternalError, problem instanceof Error ? problem.message : String(problem));
}

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: Server;
}

/** Where a progress token of the provider's hop leads: the program's request and its own token. */
interface ProgressRoute {
  readonly token: string | number;
  readonly send: (notification: ServerNotification) => Promise<void>;
}

export interface ProgramMcpOptions {
  /** A session with no request in flight and no notification stream open is released after this long, in ms. Default 300 000. */
  readonly sessionIdleMs?: number;
  /** Sessions held at once; an `initialize` beyond it releases the oldest quiet session, or gets 503 when none is quiet. Default 1000. */
  readonly maxSessions?: number;
  readonly log?: Say;
}

/** After a session's notification stream closes with nothing else open, it is released this soon (the shared session book's grace). */
export { STREAM_GRACE_MS };

export class ProgramMcpServer {
  private readonly sessions: SessionBook<Session>;
  private readonly stopRelaying: () => void;
  private readonly progress = new Map<string | number, ProgressRoute>();
  private nextProgressToken = 0;
  private readonly log: Say;

  constructor(
    private readonly mcp: McpAsks,
    private readonly maxBodyBytes: number,
    options: ProgramMcpOptions | ((line: string) => void) = {},
  ) {
    const resolved = typeof options === "function" ? { log: options } : options;
    this.log = resolved.log ?? (() => {});
    this.sessions = new SessionBook<Session>({
      idleMs: resolved.sessionIdleMs ?? 300_000,
      maxSessions: resolved.maxSessions ?? 1000,
      release: (session, why) => {
        this.log(...logEvent("program session {session} released: {why}", { session: session.transport.sessionId, why }));
        void session.server.close().catch(() => {});
      },
    });
    this.stopRelaying = mcp.onNotification((notification) => this.relayNotification(notification));
  }

  /** The route to add to the program-facing listener. */
  readonly route: RequestRoute = (request, response, pathname) => {
    if (pathname !== "/mcp") return false;
    this.handle(request, response).catch((problem: unknown) => {
      this.log(...logEvent("program /mcp: {error}", { error: problem instanceof Error ? problem.message : String(problem) }));
      if (!response.headersSent) respondError(response, 500, ErrorCode.InternalError, "internal error");
      else response.end();
    });
    return true;
  };

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Progress tokens of the provider's hop waiting for their requests' answers. */
  get progressRoutes(): number {
    return this.progress.size;
  }

  async close(): Promise<void> {
    this.stopRelaying();
    const sessions = this.sessions.clear();
    await Promise.allSettled(sessions.map(({ server }) => server.close()));
  }

  /**
   * A notification of the provider: progress goes to the one request that asked for it, with that
   * request's own token (the provider saw a token unique on its hop); a cancellation names a request
   * of another hop and goes nowhere; everything else (list changes, log messages, resource updates)
   * goes to every live session. Relayed as sent: no capability check of the SDK's server stands
   * between the provider's notification and the program. A session with no open GET stream misses
   * what is not tied to one of its requests (no replay).
   */
  private relayNotification(notification: ServerNotification): void {
    if (notification.method === "notifications/progress") {
      const params = notification.params as { progressToken: string | number };
      const route = this.progress.get(params.progressToken);
      if (route) route.send({ ...notification, params: { ...params, progressToken: route.token } } as ServerNotification).catch(() => {});
      return;
    }
    if (notification.method === "notifications/cancelled") return;
    const message = { jsonrpc: "2.0", ...notification } as JSONRPCMessage;
    for (const { transport } of this.sessions.sessions()) transport.send(message).catch(() => {});
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let body: unknown;
    if (request.method === "POST") {
      const read = await readBody(request, this.maxBodyBytes);
      if (read === undefined) return respondError(response, 413, ErrorCode.InvalidRequest, `request body is larger than ${this.maxBodyBytes} bytes`);
      try {
        body = JSON.parse(Buffer.from(read).toString("utf8"));
      } catch {
        return respondError(response, 400, ErrorCode.ParseError, "request body is not JSON");
      }
    }
    const sessionId = request.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const entry = this.sessions.get(sessionId);
      if (!entry) return respondError(response, 404, ErrorCode.InvalidRequest, "no such session");
      this.sessions.track(entry, request.method, response);
      return entry.session.transport.handleRequest(request, response, body);
    }
    if (request.method === "POST" && isInitializeRequest(body)) {
      if (!this.sessions.makeRoom()) {
        return respondError(response, 503, ErrorCode.InternalError, `too many sessions (${this.sessions.maxSessions}) are busy; try again later`);
      }
      const entry = await this.openSession();
      this.sessions.track(entry, request.method, response);
      return entry.session.transport.handleRequest(request, response, body);
    }
    respondError(response, 400, ErrorCode.InvalidRequest, "no session: initialize first");
  }

  private async openSession(): Promise<SessionEntry<Session>> {
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        this.sessions.add(id, entry);
        this.log(...logEvent("program session {session} opened", { session: id }));
      },
      onsessionclosed: () => {
        this.sessions.remove(entry);
      },
    });
    const server = new Server(PROGRAM_MCP_SERVER_INFO, {
      // Only what the wire carries: tools (list, call) and resources (list, read). Anything else
      // (prompts, completion, logging/setLevel, resources/templates/list, subscriptions) is answered
      // by the SDK with -32601 method not found.
      capabilities: { tools: { listChanged: true }, resources: { listChanged: true } },
      instructions: "Tools and resources of the provider beside this container, reached through its Diverge proxy.",
    });
    const relay = async <P extends { _meta?: { progressToken?: string | number } } | null | undefined, T>(params: P, extra: RequestExtra, ask: (params: P) => Promise<T>): Promise<T> => {
      // The program's progress token is its own (two sessions may both use 1): the provider is
      // given one unique on its hop, mapped back when its progress arrives.
      const token = params?._meta?.progressToken;
      let hop: number | undefined;
      if (token !== undefined && params) {
        hop = ++this.nextProgressToken;
        this.progress.set(hop, { token, send: extra.sendNotification as ProgressRoute["send"] });
        params = { ...params, _meta: { ...params._meta, progressToken: hop } };
      }
      let result: T;
      try {
        result = await ask(params);
        // The provider's progress rides the notification stream (kind 4, tag 11), the answer its own
        // path or channel: let the progress that arrived with the answer reach the program before it.
        if (hop !== undefined) await new Promise<void>((resolve) => setImmediate(resolve));
      } catch (problem) {
        throw programErrorOf(problem);
      } finally {
        if (hop !== undefined) this.progress.delete(hop);
      }
      // An answer the SDK cannot write as JSON (nested too deeply, say) it drops without a word,
      // which would leave the program waiting forever: answer with an error instead.
      try {
        JSON.stringify(result);
      } catch {
        this.log("program /mcp: the provider's answer could not be written as JSON; answering with an error");
        throw new ProgramFacingError(ErrorCode.InternalError, "the provider's answer could not be written as JSON", { diverge: "Unwritable" });
      }
      return result;
    };
    // The program's own request bounds each exchange: its cancellation (or its session's end) gives
    // the ask up; no timeout of the proxy's own cuts a long call the program waits for.
    const wait = (extra: RequestExtra) => ({ signal: extra.signal, timeoutMs: 0 });
    server.setRequestHandler(ListToolsRequestSchema, (request, extra) => relay(request.params ?? null, extra, (params) => this.mcp.listTools(params, wait(extra))));
    server.setRequestHandler(ListResourcesRequestSchema, (request, extra) => relay(request.params ?? null, extra, (params) => this.mcp.listResources(params, wait(extra))));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => relay(request.params, extra, (params) => this.mcp.callTool(params, wait(extra))));
    server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => relay(request.params, extra, (params) => this.mcp.readResource(params, wait(extra))));
    transport.onclose = () => {
      this.sessions.remove(entry);
    };
    const entry = this.sessions.entry({ transport, server });
    await server.connect(transport);
    return entry;
  }
}

function respondError(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { "content-type": "application/json", ...closeUnlessRead(response) }).end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}
