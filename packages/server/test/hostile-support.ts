// Pieces the hostile-peer, limits and secrets tests share: a program beside the proxy whose MCP
// server can answer big, deep or failing results and flood notifications; raw TCP WebSocket clients
// that break the framing on purpose; and a memory reading after a full collection.
import { randomUUID, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

export interface TestProgram {
  readonly port: number;
  /** What `/secrets` received, as raw bodies. */
  readonly feeds: string[];
  close(): Promise<void>;
}

export interface TestProgramOptions {
  /** How `/secrets` answers: "accept" (200), "refuse" (422, naming no value), "error" (500, plain text). */
  secrets?: "accept" | "refuse" | "error";
  /** How `/register` answers. Default: 200 with no tools. */
  register?: "accept" | "refuse";
}

/**
 * A program with an MCP server at `/mcp` (the SDK's, Streamable HTTP). Tools: `echo` (returns its
 * arguments as structured content), `big` (text of `bytes` bytes), `deep` (structured content nested
 * `depth` levels), `spam` (`count` notifications of `bytes` bytes each), `fail` (an MCP error whose
 * message and data are the given text).
 */
export async function startTestProgram(options: TestProgramOptions = {}): Promise<TestProgram> {
  const feeds: string[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const server = new McpServer({ name: "hostile-program", version: "1.0.0" }, { capabilities: { logging: {} } });
    server.registerTool("echo", { inputSchema: { value: z.unknown().optional() } }, async (args) => ({ content: [{ type: "text", text: "echo" }], structuredContent: { echoed: args.value as never } }));
    server.registerTool("big", { inputSchema: { bytes: z.number() } }, async ({ bytes }) => ({ content: [{ type: "text", text: "x".repeat(bytes) }] }));
    server.registerTool("deep", { inputSchema: { depth: z.number() } }, async ({ depth }) => ({ content: [], structuredContent: { deep: JSON.parse("[".repeat(depth) + "]".repeat(depth)) } }));
    server.registerTool("spam", { inputSchema: { count: z.number(), bytes: z.number() } }, async ({ count, bytes }, extra) => {
      const data = "n".repeat(bytes);
      for (let i = 0; i < count; i++) await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: `${i}:${data}` } });
      return { content: [{ type: "text", text: `sent ${count}` }] };
    });
    server.registerTool("fail", { inputSchema: { text: z.string() } }, async ({ text }) => {
      throw new McpError(-32001, `failed with ${text}`, { text });
    });
    server.registerResource("r", "test://r", {}, async (uri) => ({ contents: [{ uri: uri.href, text: "r" }] }));
    return server;
  };
  const handleMcp = async (request: IncomingMessage, response: ServerResponse, body: unknown) => {
    const id = request.headers["mcp-session-id"];
    const existing = typeof id === "string" ? sessions.get(id) : undefined;
    if (existing) return existing.handleRequest(request, response, body);
    const server = build();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => void sessions.set(sid, transport),
    });
    await server.connect(transport);
    await transport.handleRequest(request, response, body);
  };
  const http: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const path = new URL(request.url ?? "/", "http://program").pathname;
      if (path === "/register") {
        if (options.register === "refuse") return void response.writeHead(422, { "content-type": "application/json" }).end('{"error":"no"}');
        return void response.writeHead(200, { "content-type": "application/json" }).end("[]");
      }
      if (path === "/secrets") {
        feeds.push(text);
        const how = options.secrets ?? "accept";
        if (how === "accept") return void response.writeHead(200).end("{}");
        if (how === "refuse") return void response.writeHead(422, { "content-type": "application/json" }).end('{"error":"a secret is missing"}');
        return void response.writeHead(500, { "content-type": "text/plain" }).end("internal trouble");
      }
      if (path === "/mcp") {
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          return void response.writeHead(400).end();
        }
        handleMcp(request, response, body).catch(() => {
          if (!response.headersSent) response.writeHead(500).end();
          else response.end();
        });
        return;
      }
      response.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    port: (http.address() as AddressInfo).port,
    feeds,
    async close() {
      await Promise.allSettled([...sessions.values()].map((transport) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** A TCP socket that has completed a WebSocket upgrade on `path` and speaks raw frames. */
export async function rawUpgrade(port: number, path: string): Promise<{ socket: Socket; status: number }> {
  const socket = connect({ host: "127.0.0.1", port });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.on("error", () => {});
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\n\r\n`,
  );
  const head = await new Promise<string>((resolve) => {
    let text = "";
    const onData = (chunk: Buffer) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n\r\n")) {
        socket.off("data", onData);
        resolve(text);
      }
    };
    socket.on("data", onData);
  });
  return { socket, status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1] ?? 0) };
}

/** One client WebSocket frame (masked), FIN set unless told; `claimed` overrides the length field. */
export function wsFrame(opcode: number, payload: Uint8Array, options: { fin?: boolean; claimed?: number } = {}): Buffer {
  const length = options.claimed ?? payload.length;
  const header: number[] = [(options.fin === false ? 0 : 0x80) | opcode];
  if (length < 126) header.push(0x80 | length);
  else if (length < 65536) header.push(0x80 | 126, length >> 8, length & 0xff);
  else {
    header.push(0x80 | 127, 0, 0, 0, 0);
    header.push((length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff);
  }
  const mask = randomBytes(4);
  const masked = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) masked[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([Buffer.from(header), mask, masked]);
}

let gcFunction: (() => void) | undefined;

/** A full collection: `global.gc` when node runs with --expose-gc, else the same function made available. */
export function collect(): void {
  if (!gcFunction) {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (exposed) gcFunction = exposed;
    else {
      setFlagsFromString("--expose-gc");
      gcFunction = runInNewContext("gc") as () => void;
    }
  }
  gcFunction();
}

/** Heap in use plus memory outside the heap (buffers), after full collections. */
export async function settledMemory(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    collect();
  }
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

export async function waitUntil(condition: () => boolean, ms = 30_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export const MiB = 1024 * 1024;
