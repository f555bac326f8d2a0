// The program-facing side of the outward MCP exchanges: an MCP server (the SDK's, over its Streamable
// HTTP transport) at `/mcp` on the proxy's loopback listener. The program inside the container uses
// any MCP client; its `tools/list`, `resources/list`, `tools/call` and `resources/read` become asks
// on `/requests`, their answers go back to it, and the provider's notifications reach every session.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestRoute } from "../listener.js";
import { McpExchangeError } from "./errors.js";
import type { McpAsks } from "./mcp.js";

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

export class ProgramMcpServer {
  private readonly sessions = new Map<string, Session>();
  private readonly stopRelaying: () => void;

  constructor(
    private readonly mcp: McpAsks,
    private readonly maxBodyBytes: number,
    private readonly log: (line: string) => void = () => {},
  ) {
    this.stopRelaying = mcp.onNotification((notification) => {
      // Relayed as sent: no capability check of the SDK's server stands between the provider's
      // notification and the program. A session with no open GET stream simply misses it (no replay).
      const message = { jsonrpc: "2.0", ...notification } as JSONRPCMessage;
      for (const { transport } of this.sessions.values()) transport.send(message).catch(() => {});
    });
  }

  /** The route to add to the program-facing listener. */
  readonly route: RequestRoute = (request, response, pathname) => {
    if (pathname !== "/mcp") return false;
    this.handle(request, response).catch((problem: unknown) => {
      this.log(`program /mcp: ${problem instanceof Error ? problem.message : String(problem)}`);
      if (!response.headersSent) respondError(response, 500, ErrorCode.InternalError, "internal error");
      else response.end();
    });
    return true;
  };

  get sessionCount(): number {
    return this.sessions.size;
  }

  async close(): Promise<void> {
    this.stopRelaying();
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(sessions.map(({ server }) => server.close()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let body: unknown;
    if (request.method === "POST") {
      const read = await readBody(request, this.maxBodyBytes);
      if (read === "tooLarge") return respondError(response, 413, ErrorCode.InvalidRequest, `request body is larger than ${this.maxBodyBytes} bytes`);
      try {
        body = JSON.parse(read);
      } catch {
        return respondError(response, 400, ErrorCode.ParseError, "request body is not JSON");
      }
    }
    const sessionId = request.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const session = this.sessions.get(sessionId);
      if (!session) return respondError(response, 404, ErrorCode.InvalidRequest, "no such session");
      return session.transport.handleRequest(request, response, body);
    }
    if (request.method === "POST" && isInitializeRequest(body)) {
      const session = await this.openSession();
      return session.transport.handleRequest(request, response, body);
    }
    respondError(response, 400, ErrorCode.InvalidRequest, "no session: initialize first");
  }

  private async openSession(): Promise<Session> {
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        this.sessions.set(id, session);
        this.log(`program session ${id} opened`);
      },
      onsessionclosed: (id) => {
        this.sessions.delete(id);
      },
    });
    const server = new Server(PROGRAM_MCP_SERVER_INFO, {
      capabilities: { tools: { listChanged: true }, resources: { listChanged: true } },
      instructions: "Tools and resources of the provider beside this container, reached through its Diverge proxy.",
    });
    const relay = async <T>(ask: () => Promise<T>): Promise<T> => {
      let result: T;
      try {
        result = await ask();
      } catch (problem) {
        throw programErrorOf(problem);
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
    server.setRequestHandler(ListToolsRequestSchema, (request) => relay(() => this.mcp.listTools(request.params ?? null)));
    server.setRequestHandler(ListResourcesRequestSchema, (request) => relay(() => this.mcp.listResources(request.params ?? null)));
    server.setRequestHandler(CallToolRequestSchema, (request) => relay(() => this.mcp.callTool(request.params)));
    server.setRequestHandler(ReadResourceRequestSchema, (request) => relay(() => this.mcp.readResource(request.params)));
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    const session: Session = { transport, server };
    await server.connect(transport);
    return session;
  }
}

function readBody(request: IncomingMessage, limit: number): Promise<string | "tooLarge"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    request.on("data", (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => resolve(over ? "tooLarge" : Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function respondError(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}
