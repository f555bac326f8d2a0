// A container program for the inward-MCP tests: `/register` (no tools), `/secrets`, and `/mcp`, a real
// MCP SDK server over Streamable HTTP with an event store and a retry interval, whose tools use MCP
// 2025-11-25's polling pattern: the server closes the SSE stream of the POST mid-call (the SDK's
// `closeSSEStream`) and the client must resume it with `Last-Event-ID` to get the answer.
//
// Tools: `resumed` (closes its stream, answers after a moment on the resumed stream), `never`
// (closes its stream and never answers), `forgotten` (closes its stream and forgets the session), `log` (sends a `notifications/message`, then answers).
// `resources: false` makes a server that declares no resources capability.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { InMemoryEventStore } from "@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

export interface ResumeContainer {
  readonly port: number;
  /** Tool calls the server has begun (so a test knows a call reached it). */
  readonly calls: string[];
  /** GETs that carried Last-Event-ID (resumptions). */
  readonly resumptions: () => number;
  close(): Promise<void>;
}

export async function startResumeContainer(options: { resources?: boolean; retryMs?: number } = {}): Promise<ResumeContainer> {
  const calls: string[] = [];
  let resumptions = 0;
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const pending = new Set<() => void>();
  const makeServer = () => {
    const server = new McpServer({ name: "resume-container", version: "1.0.0" }, { capabilities: options.resources === false ? { tools: {}, logging: {} } : { tools: {}, resources: {}, logging: {} } });
    server.registerTool("resumed", { description: "closes its SSE stream mid-call and answers on the resumed one" }, async (extra) => {
      calls.push("resumed");
      extra.closeSSEStream?.();
      await new Promise((resolve) => setTimeout(resolve, 300));
      return { content: [{ type: "text", text: "answered after the stream was resumed" }] };
    });
    server.registerTool("never", { description: "closes its SSE stream and never answers" }, async (extra) => {
      calls.push("never");
      extra.closeSSEStream?.();
      await new Promise<void>((resolve) => {
        pending.add(resolve);
        extra.signal.addEventListener("abort", () => {
          calls.push("never:cancelled");
          resolve();
        });
      });
      return { content: [{ type: "text", text: "late" }] };
    });
    server.registerTool("forgotten", { description: "closes its SSE stream, then the server forgets the session: the stream cannot be resumed" }, async (extra) => {
      calls.push("forgotten");
      extra.closeSSEStream?.();
      const session = extra.sessionId ? transports.get(extra.sessionId) : undefined;
      if (extra.sessionId) transports.delete(extra.sessionId);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await session?.close();
      return { content: [{ type: "text", text: "never delivered" }] };
    });
    server.registerTool("log", { description: "sends a log message, then answers" }, async (extra) => {
      calls.push("log");
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: "hello from the container" } });
      return { content: [{ type: "text", text: "logged" }] };
    });
    if (options.resources !== false) {
      server.registerResource("note", "note://one", { mimeType: "text/plain" }, async () => ({ contents: [{ uri: "note://one", text: "one" }] }));
    }
    return server;
  };

  const readBody = (request: IncomingMessage): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        try {
          resolve(text ? JSON.parse(text) : undefined);
        } catch (error) {
          reject(error);
        }
      });
      request.on("error", reject);
    });

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (path === "/register") {
      await readBody(request);
      return response.writeHead(200, { "content-type": "application/json" }).end("[]");
    }
    if (path === "/secrets") {
      await readBody(request);
      return response.writeHead(200).end();
    }
    if (path !== "/mcp") return response.writeHead(404).end();
    if (request.method === "GET" && request.headers["last-event-id"]) resumptions++;
    const body = request.method === "POST" ? await readBody(request) : undefined;
    const header = request.headers["mcp-session-id"];
    const id = Array.isArray(header) ? header[0] : header;
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id || !isInitializeRequest(body)) return response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
      const made: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        retryInterval: options.retryMs ?? 100,
        onsessioninitialized: (sessionId) => void transports.set(sessionId, made),
      });
      made.onclose = () => {
        if (made.sessionId) transports.delete(made.sessionId);
      };
      await makeServer().connect(made);
      transport = made;
    }
    await transport.handleRequest(request, response, body);
  };

  const http = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    port: (http.address() as AddressInfo).port,
    calls,
    resumptions: () => resumptions,
    async close() {
      for (const resolve of pending) resolve();
      await Promise.allSettled([...transports.values()].map((transport) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
