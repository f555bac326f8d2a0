// Real pieces for the provider-side tests: an MCP server (the SDK's, over Streamable HTTP on
// 127.0.0.1), a program (the SDK's client) on a proxy's `/mcp`, and a fake proxy for the asks a real
// proxy never sends (malformed ones).
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { McpError, type ServerNotification } from "@modelcontextprotocol/sdk/types.js";

export const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface UpstreamMcp {
  readonly url: string;
  /** Sends `notification` to every session of the server. */
  notify(notification: ServerNotification): Promise<void>;
  /** How many times each tool ran. */
  readonly runs: Map<string, number>;
  /** Sessions whose GET stream (the notification stream) is open. */
  readonly openStreams: () => number;
  close(): Promise<void>;
}

/** Builds the MCP server every test and the demo-like checks use: a few tools and a resource. */
export function buildMcpServer(runs: Map<string, number>): McpServer {
  const server = new McpServer({ name: "upstream", version: "1.0.0" }, { capabilities: { logging: {} } });
  const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
  server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
    ran("add");
    return { content: [{ type: "text", text: String(a + b) }] };
  });
  server.registerTool("echo", { description: "Echoes its id", inputSchema: { id: z.string() } }, async ({ id }) => {
    ran("echo");
    return { content: [{ type: "text", text: id }], structuredContent: { id } };
  });
  server.registerTool("refuse", { description: "Always fails with an MCP error", inputSchema: {} }, async () => {
    ran("refuse");
    throw new McpError(-32042, "refused on purpose", { reason: "test" });
  });
  server.registerResource("greeting", "note://greeting", { mimeType: "text/plain", description: "A greeting" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "hello from upstream" }],
  }));
  return server;
}

export async function startUpstreamMcp(port = 0): Promise<UpstreamMcp> {
  const runs = new Map<string, number>();
  const sessions = new Map<string, { server: McpServer; transport: StreamableHTTPServerTransport }>();
  const http: Server = createServer(async (request, response) => {
    try {
      const body = request.method === "POST" ? JSON.parse(await readAll(request)) : undefined;
      const id = request.headers["mcp-session-id"];
      let session = typeof id === "string" ? sessions.get(id) : undefined;
      if (!session) {
        if (typeof id === "string") {
          response.writeHead(404).end();
          return;
        }
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => {
            sessions.set(sessionId, session!);
          },
        });
        const server = buildMcpServer(runs);
        session = { server, transport };
        await server.connect(transport);
      }
      await session.transport.handleRequest(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve) => http.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    runs,
    async notify(notification) {
      await Promise.all([...sessions.values()].map(({ server }) => server.server.notification(notification).catch(() => {})));
    },
    openStreams: () => [...sessions.values()].filter(({ transport }) => (transport as unknown as { _webStandardTransport: { _streamMapping: Map<string, unknown> } })._webStandardTransport._streamMapping.has("_GET_stream")).length,
    async close() {
      await Promise.allSettled([...sessions.values()].map(({ server }) => server.close()));
      http.closeAllConnections();
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

/** A program inside the container: the SDK's client on the proxy's `/mcp`. */
export async function programClient(programPort: number): Promise<Client> {
  const client = new Client({ name: "program", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)));
  return client;
}

/** One answer path as the fake proxy saw it. */
export interface SeenPath {
  readonly path: string;
  readonly messages: Uint8Array[];
  /** The close code once it closed: 1005/1000 after a Close frame, 1006 when cut. */
  closeCode?: number;
  readonly closed: Promise<number>;
}

/** A WebSocket server that plays the proxy by hand: it sends whatever asks a test gives it. */
export class FakeProxy {
  readonly paths: SeenPath[] = [];
  readonly requestsSockets: WebSocket[] = [];
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly http = createServer((_request, response) => response.writeHead(426).end());
  private readonly waiters: (() => void)[] = [];
  refuseRequests: number | undefined;

  async start(): Promise<string> {
    this.http.on("upgrade", (request, socket, head) => {
      const path = new URL(request.url ?? "/", "http://x").pathname;
      if (path === "/requests" && this.refuseRequests) {
        socket.end(`HTTP/1.1 ${this.refuseRequests} Refused\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
        return;
      }
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        if (path === "/requests") this.requestsSockets.push(ws);
        else {
          let closedResolve!: (code: number) => void;
          const seen: SeenPath = { path, messages: [], closed: new Promise((resolve) => (closedResolve = resolve)) };
          ws.on("message", (data, isBinary) => {
            if (isBinary) seen.messages.push(new Uint8Array(data as Buffer));
          });
          ws.on("close", (code) => {
            seen.closeCode = code;
            closedResolve(code);
          });
          this.paths.push(seen);
        }
        for (const wake of this.waiters.splice(0)) wake();
      });
    });
    await new Promise<void>((resolve) => this.http.listen(0, "127.0.0.1", resolve));
    return `ws://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
  }

  /** Waits until `check` holds, re-checking after every new connection (and every 20 ms). */
  async until(check: () => boolean, ms = 60_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error("condition not met in time");
      await Promise.race([new Promise<void>((resolve) => this.waiters.push(resolve)), delay(20)]);
    }
  }

  get requests(): WebSocket | undefined {
    const last = this.requestsSockets[this.requestsSockets.length - 1];
    return last && last.readyState === last.OPEN ? last : undefined;
  }

  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }
}

/** `[channel u32 BE][kind][payload]`, built by hand so it can be wrong. */
export function rawAsk(channel: number, kind: number, payload: Uint8Array | string = new Uint8Array(0)): Uint8Array {
  const body = typeof payload === "string" ? new TextEncoder().encode(payload) : payload;
  const out = new Uint8Array(5 + body.length);
  new DataView(out.buffer).setUint32(0, channel);
  out[4] = kind;
  out.set(body, 5);
  return out;
}

/** Captures the rejection of a promise as soon as it is made; fails if it resolves. */
export function rejection(promise: Promise<unknown>): Promise<any> {
  return promise.then(
    () => {
      throw new Error("expected a rejection, got a result");
    },
    (error: unknown) => error,
  );
}
