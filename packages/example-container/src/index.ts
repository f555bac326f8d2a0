// The example tool-container program: the HTTP server a container's program runs beside the proxy.
// `POST /register` takes the run's arguments and answers with the tools it declares, `POST /secrets`
// takes the secrets' values, and `/mcp` is its MCP server (Streamable HTTP, one session per client).
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import pg from "pg";
import { z } from "zod";

/** The folder holding this package's `DIVERGE.md`: a container root for tests and the demo. */
export const exampleRoot = join(dirname(fileURLToPath(import.meta.url)), "..");

export interface ExampleContainerOptions {
  /** Port of the program's HTTP server. Default 0 (a free one). */
  readonly port?: number;
  readonly host?: string;
  /** Where the database driver connects: the proxy's postgres listener (a function when known later). */
  readonly pgPort?: number | (() => number);
  /** Credentials the driver presents to the database. */
  readonly database?: { readonly user?: string; readonly password?: string; readonly database?: string };
  /** Secret names the program needs before it accepts a feed. Default `["API_KEY"]`. */
  readonly requiredSecrets?: readonly string[];
}

export interface ExampleContainer {
  readonly port: number;
  readonly url: string;
  /** The arguments `/register` took, once it has. */
  readonly registered: unknown;
  /** Whether `/secrets` has taken a complete feed. */
  readonly fed: boolean;
  /** Every MCP request the server handled, in order, as `method name-or-uri`. */
  readonly calls: readonly string[];
  /** Tells every MCP session that the tool and resource lists changed (`notifications/tools/list_changed` and `notifications/resources/list_changed`), as a container whose tools changed would. */
  listChanged(): void;
  close(): Promise<void>;
}

export async function startExampleContainer(options: ExampleContainerOptions = {}): Promise<ExampleContainer> {
  const requiredSecrets = options.requiredSecrets ?? ["API_KEY"];
  let registered: { greeting?: unknown } | undefined;
  let secrets: Record<string, string> | undefined;
  const calls: string[] = [];
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();

  const buildMcpServer = (): McpServer => {
    const server = new McpServer({ name: "example-greeter", version: "1.0.0" }, { capabilities: { logging: {} } });
    server.registerTool(
      "greet",
      { description: "Greets a name with the registered greeting.", inputSchema: { name: z.string() } },
      async ({ name }) => {
        const greeting = typeof registered?.greeting === "string" ? registered.greeting : "Hello";
        return { content: [{ type: "text", text: `${greeting}, ${name}!` }] };
      },
    );
    server.registerTool(
      "query",
      { description: "Runs one SQL statement against the container's database and returns the rows as JSON.", inputSchema: { sql: z.string() } },
      async ({ sql }) => {
        const pgPort = typeof options.pgPort === "function" ? options.pgPort() : options.pgPort;
        if (pgPort === undefined) return { isError: true, content: [{ type: "text", text: "no database is configured" }] };
        const client = new pg.Client({ host: "127.0.0.1", port: pgPort, ...options.database });
        try {
          await client.connect();
          const result = await client.query(sql);
          return { content: [{ type: "text", text: JSON.stringify(result.rows) }] };
        } catch (error) {
          return { isError: true, content: [{ type: "text", text: `query failed: ${(error as Error).message}` }] };
        } finally {
          await client.end().catch(() => {});
        }
      },
    );
    server.registerTool(
      "notify",
      { description: "Sends a logging notification with the given text.", inputSchema: { text: z.string() } },
      async ({ text }, extra) => {
        await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: text } });
        return { content: [{ type: "text", text: "sent" }] };
      },
    );
    server.registerResource("readme", "example://readme", { description: "What this container is.", mimeType: "text/plain" }, async (uri) => {
      return { contents: [{ uri: uri.href, text: "The example greeter." }] };
    });
    return server;
  };

  const handleMcp = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const body = request.method === "POST" ? await readJson(request) : undefined;
    const sessionId = request.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (existing) {
      if (isRequestTo(body)) calls.push(describeCall(body));
      await existing.transport.handleRequest(request, response, body);
      return;
    }
    if (request.method !== "POST" || !isInitialize(body)) {
      response.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no valid session" }, id: null }));
      return;
    }
    const server = buildMcpServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(request, response, body);
  };

  const http: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://program").pathname;
    const route = async () => {
      if (path === "/register" && request.method === "POST") {
        const args = (await readJson(request)) as { greeting?: unknown } | undefined;
        if (!args || typeof args !== "object" || typeof args.greeting !== "string") {
          return sendJson(response, 422, { error: "arguments must be an object with a string `greeting`" });
        }
        registered = args;
        return sendJson(response, 200, [
          {
            name: "greeter",
            image: { name: "diverge/example-greeter", digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000" },
            memory: 268435456,
            disk: 67108864,
            arguments: args,
            instructions: `Call greet with a name; it answers "${args.greeting}, <name>!".`,
          },
        ]);
      }
      if (path === "/secrets" && request.method === "POST") {
        const values = (await readJson(request)) as Record<string, unknown> | undefined;
        const missing = requiredSecrets.filter((name) => typeof values?.[name] !== "string" || values[name] === "");
        // The refusal names what is missing, never a value.
        if (missing.length > 0) return sendJson(response, 422, { error: "missing secrets", missing });
        secrets = values as Record<string, string>;
        return sendJson(response, 200, { fed: true });
      }
      if (path === "/mcp") return handleMcp(request, response);
      response.writeHead(404).end();
    };
    route().catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 400, { error: (error as Error).message });
      else response.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve));
  const port = (http.address() as AddressInfo).port;

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    get registered() {
      return registered;
    },
    get fed() {
      return secrets !== undefined;
    },
    calls,
    listChanged() {
      for (const { server } of sessions.values()) {
        server.sendToolListChanged();
        server.sendResourceListChanged();
      }
    },
    async close() {
      await Promise.allSettled([...sessions.values()].map(({ transport }) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("the body is not JSON");
  }
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
}

function isInitialize(body: unknown): boolean {
  return typeof body === "object" && body !== null && (body as { method?: unknown }).method === "initialize";
}

function isRequestTo(body: unknown): body is { method: string; params?: { name?: string; uri?: string } } {
  return typeof body === "object" && body !== null && typeof (body as { method?: unknown }).method === "string" && "id" in body;
}

function describeCall(body: { method: string; params?: { name?: string; uri?: string } }): string {
  if (body.method === "tools/call" || body.method === "resources/read") return `${body.method} ${body.params?.name ?? body.params?.uri ?? ""}`;
  return body.method;
}
