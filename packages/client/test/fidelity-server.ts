// A far MCP server for the fidelity tests: the SDK's low-level Server over Streamable HTTP, with every
// shape of answer a relay must carry untouched (pages, every content type, isError, MCP errors with
// data, `_meta`, a JSON Schema 2020-12 input schema), progress, and notifications on demand. It can be
// stopped and started again on the same port, forgetting its sessions as a restarted server does.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  CallToolResultSchema,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A JSON Schema 2020-12 input schema using what older drafts lack; it must arrive byte for byte. */
export const SCHEMA_2020_12 = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "urn:test:tuple",
  type: "object",
  $defs: { pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer", minimum: 0 }], items: false } },
  properties: { pair: { $ref: "#/$defs/pair" }, extra: { type: "object", unevaluatedProperties: false, dependentRequired: { a: ["b"] } } },
  required: ["pair"],
  additionalProperties: false,
};

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

export const EVERYTHING = {
  content: [
    { type: "text", text: "plain", annotations: { audience: ["user"], priority: 0.5 }, _meta: { "test/part": 1 } },
    { type: "image", data: PNG, mimeType: "image/png" },
    { type: "audio", data: WAV, mimeType: "audio/wav" },
    { type: "resource", resource: { uri: "note://embedded", mimeType: "text/plain", text: "embedded text" } },
    { type: "resource", resource: { uri: "blob://embedded", mimeType: "application/octet-stream", blob: "AAECAw==" } },
    { type: "resource_link", uri: "note://linked", name: "linked", description: "a link", mimeType: "text/plain" },
  ],
  structuredContent: { answer: 42, nested: { list: [1, "two", null] } },
  _meta: { "test/meta": { trace: "abc" } },
};

export function buildFidelityServer(): Server {
  const server = new Server(
    { name: "far", version: "1.0.0" },
    { capabilities: { tools: { listChanged: true }, resources: { listChanged: true }, logging: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request) => {
    if (request.params?.cursor === "tools-2") return { tools: [{ name: "tuple", description: "2020-12", inputSchema: SCHEMA_2020_12 as never }], _meta: { "test/page": 2 } };
    if (request.params?.cursor !== undefined) throw new McpError(-32602, "unknown cursor", { cursor: request.params.cursor });
    return {
      tools: ["progress", "everything", "fails", "mcp-error", "notify"].map((name) => ({ name, inputSchema: { type: "object" as const } })),
      nextCursor: "tools-2",
    };
  });
  server.setRequestHandler(ListResourcesRequestSchema, (request) => {
    if (request.params?.cursor === "res-2") return { resources: [{ uri: "blob://two", name: "two", mimeType: "application/octet-stream" }] };
    return { resources: [{ uri: "note://one", name: "one", mimeType: "text/plain", annotations: { priority: 1 } }], nextCursor: "res-2" };
  });
  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    if (request.params.uri === "note://one") return { contents: [{ uri: "note://one", mimeType: "text/plain", text: "one", _meta: { "test/r": true } }] };
    if (request.params.uri === "blob://two") return { contents: [{ uri: "blob://two", mimeType: "application/octet-stream", blob: "AAEC" }] };
    throw new McpError(-32002, "Resource not found", { uri: request.params.uri });
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case "progress": {
        const token = request.params._meta?.progressToken;
        const steps = Number(args.steps ?? 3);
        const tag = String(args.tag ?? "");
        for (let step = 1; step <= steps; step++) {
          if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, total: steps, message: `${tag} ${step}` } });
          const wait = Number(args.delayMs ?? 5);
          // 0: the next step (or the answer) follows at once.
          if (wait > 0) await delay(wait);
        }
        return { content: [{ type: "text", text: `${tag} done` }], _meta: { sawToken: token !== undefined } };
      }
      case "everything":
        return EVERYTHING as never;
      case "fails":
        return { content: [{ type: "text", text: "it did not work" }], isError: true };
      case "mcp-error":
        throw new McpError(-32042, "custom failure", { why: ["deep", 1], n: null });
      case "notify": {
        await server.sendToolListChanged();
        await server.sendLoggingMessage({ level: "info", logger: "far", data: { said: args.say ?? "hello" } });
        await server.sendResourceUpdated({ uri: "note://one" });
        return { content: [{ type: "text", text: "notified" }] };
      }
      default:
        throw new McpError(-32602, `Unknown tool: ${request.params.name}`);
    }
  });
  return server;
}

export interface FarServer {
  readonly port: number;
  readonly url: string;
  /** Sends a notification to every session's notification stream. */
  notifyAll(notification: ServerNotification): Promise<void>;
  /** Sessions the server holds now. */
  sessionCount(): number;
  /** HTTP requests to its MCP endpoint so far. */
  requestCount(): number;
  /** Forgets every session without closing a connection (the next request of one gets 404). */
  forget(): void;
  /** Stops listening and drops every connection and session, as a process that exits. */
  stop(): Promise<void>;
}

/** Starts the far server on `port` (0: a free one; the same port again after `stop`: a restart). */
export async function startFarServer(port = 0): Promise<FarServer> {
  const sessions = new Map<string, { server: Server; transport: StreamableHTTPServerTransport }>();
  let requests = 0;
  const http: HttpServer = createServer(async (request, response) => {
    try {
      // Also the container program's own endpoints, so the proxy can begin this "container".
      if (request.url === "/register" || request.url === "/secrets") {
        await readAll(request);
        response.writeHead(200, { "content-type": "application/json" }).end(request.url === "/register" ? "[]" : "{}");
        return;
      }
      requests++;
      const body = request.method === "POST" ? JSON.parse(await readAll(request)) : undefined;
      const id = request.headers["mcp-session-id"];
      let session = typeof id === "string" ? sessions.get(id) : undefined;
      if (!session) {
        if (typeof id === "string") {
          response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
          return;
        }
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => void sessions.set(sessionId, session!),
          onsessionclosed: (sessionId) => void sessions.delete(sessionId),
        });
        const server = buildFidelityServer();
        session = { server, transport };
        await server.connect(transport);
      }
      await session.transport.handleRequest(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, "127.0.0.1", () => resolve());
  });
  const bound = (http.address() as AddressInfo).port;
  return {
    port: bound,
    url: `http://127.0.0.1:${bound}/mcp`,
    async notifyAll(notification) {
      await Promise.all([...sessions.values()].map(({ server }) => server.notification(notification).catch(() => {})));
    },
    sessionCount: () => sessions.size,
    requestCount: () => requests,
    forget() {
      sessions.clear();
    },
    async stop() {
      const all = [...sessions.values()];
      sessions.clear();
      http.closeAllConnections();
      await Promise.allSettled(all.map(({ server }) => server.close()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

function readAll(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

/** An outcome two routes can be compared by: the result, or the MCP error's code, message and data. */
export async function outcome(call: Promise<unknown>): Promise<unknown> {
  try {
    return { result: await call };
  } catch (error) {
    if (error instanceof McpError) return { code: error.code, message: error.message.replace(/^MCP error -?\d+: /, ""), data: error.data };
    // The provider APIs' typed errors (ContainerError, ToolPathError) carry the server's MCP error as `detail.error`.
    const detail = (error as { detail?: { variant?: string; error?: { code: number; message: string; data?: unknown } } }).detail;
    if (detail?.variant === "Mcp" && detail.error) return { code: detail.error.code, message: detail.error.message, data: detail.error.data };
    return { other: String(error) };
  }
}

/** The four exchanges the wire carries, however a route reaches them. */
export interface Exchanges {
  listTools(params?: object): Promise<unknown>;
  listResources(params?: object): Promise<unknown>;
  callTool(params: object): Promise<unknown>;
  readResource(params: object): Promise<unknown>;
}

/** Every exchange the wire carries, in every shape the far server answers. */
export const EXCHANGES: [string, (via: Exchanges) => Promise<unknown>][] = [
  ["tools/list, first page", (via) => via.listTools()],
  ["tools/list, second page (2020-12 schema)", (via) => via.listTools({ cursor: "tools-2" })],
  ["tools/list, a bad cursor (-32602 with data)", (via) => via.listTools({ cursor: "nope" })],
  ["resources/list, both pages", async (via) => [await via.listResources(), await via.listResources({ cursor: "res-2" })]],
  ["resources/read, text and blob", async (via) => [await via.readResource({ uri: "note://one" }), await via.readResource({ uri: "blob://two" })]],
  ["resources/read, not found (-32002 with data)", (via) => via.readResource({ uri: "note://missing" })],
  ["tools/call, every content type with _meta", (via) => via.callTool({ name: "everything", arguments: {}, _meta: { "test/req": 1 } })],
  ["tools/call, isError", (via) => via.callTool({ name: "fails", arguments: {} })],
  ["tools/call, an MCP error with data", (via) => via.callTool({ name: "mcp-error", arguments: {} })],
  ["tools/call, unknown tool", (via) => via.callTool({ name: "nothing-here", arguments: {} })],
];

/** The exchanges through an MCP SDK client. */
export function viaSdk(client: Client): Exchanges {
  return {
    listTools: (params?: object) => client.listTools(params),
    listResources: (params?: object) => client.listResources(params),
    callTool: (params: object) => client.request({ method: "tools/call", params: params as never }, CallToolResultSchema),
    readResource: (params: object) => client.readResource(params as never),
  };
}
