// pnpm demo: everything on loopback, nothing to install. First the many-paths transport (seed 000):
// a program inside the container calls MCP through the proxy, the proxy asks on /requests, the
// provider relays each ask to a real MCP server and answers on /mcp/*/{channel}. Then tools::begin,
// the bridge, vault and command, the filesystem, and agent containers (agents.ts).
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { connectProxy, relayToMcp } from "@diverge/client";
import { startProxy } from "@diverge/server";
import { runBeginDemo } from "./begin.js";
import { runBridgeDemo } from "./bridge.js";
import { runVaultDemo } from "./vault.js";
import { runFilesystemDemo } from "./filesystem.js";
import { runAgentsDemo } from "./agents.js";

function show(label: string, value: unknown): void {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s+/g, " ");
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

/** The provider's MCP server: two tools, a resource, and a log notification whenever `shout` runs. */
function buildMcpServer(): McpServer {
  const server = new McpServer({ name: "provider-tools", version: "1.0.0" }, { capabilities: { logging: {} } });
  server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
    content: [{ type: "text", text: String(a + b) }],
  }));
  server.registerTool("shout", { description: "Upper-cases a text", inputSchema: { text: z.string() } }, async ({ text }) => {
    await server.server.sendLoggingMessage({ level: "info", data: `shouted ${text.length} characters` });
    return { content: [{ type: "text", text: text.toUpperCase() }] };
  });
  server.registerResource("welcome", "note://welcome", { mimeType: "text/plain", description: "A welcome note" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "Welcome, program: this note came from the provider." }],
  }));
  return server;
}

async function startMcpServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Map<string, { server: McpServer; transport: StreamableHTTPServerTransport }>();
  const http = createServer(async (request, response) => {
    try {
      const body = request.method === "POST" ? JSON.parse(await readAll(request)) : undefined;
      const id = request.headers["mcp-session-id"];
      let session = typeof id === "string" ? sessions.get(id) : undefined;
      if (!session) {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => {
            sessions.set(sessionId, session!);
          },
        });
        session = { server: buildMcpServer(), transport };
        await session.server.connect(transport);
      }
      await session.transport.handleRequest(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
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

function textOf(result: unknown): string {
  return (((result as { content?: unknown }).content ?? []) as { type: string; text?: string }[]).map((block) => block.text ?? `[${block.type}]`).join(" ");
}

export async function runPathsDemo(): Promise<void> {
  process.stdout.write("\nMCP exchanges the proxy asks, over /requests and /mcp/*/{channel} (seed 000)\n");
  const mcpServer = await startMcpServer();
  show("MCP server", `${mcpServer.url} (tools add, shout; resource note://welcome)`);
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  show("proxy", `ws://127.0.0.1:${proxy.port}/requests; the program's MCP at http://127.0.0.1:${proxy.programPort}/mcp`);

  const relay = relayToMcp({ url: mcpServer.url });
  const provider = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay, {
    onEvent: (event) => {
      if (event.type === "ask") show(`  /requests ask ${event.ask.channel}`, event.ask.variant);
      else if (event.type === "pathEnded" && event.outcome !== "streamEnded") show(`  ${event.path}`, `${event.outcome}, closed ${event.ending.clean ? "cleanly" : "abruptly"}`);
      else if (event.type === "error") show("  provider error", event.error.message);
    },
  });
  await provider.whenConnected();
  show("provider", "holds /requests and relays every ask to the MCP server");

  const program = new Client({ name: "program-in-the-container", version: "1.0.0" });
  await program.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
  let notified!: () => void;
  const notification = new Promise<void>((resolve) => (notified = resolve));
  program.fallbackNotificationHandler = async (message) => {
    show("program notified", `${message.method} ${JSON.stringify(message.params ?? {})}`);
    notified();
  };
  show("program", "an MCP SDK client inside the container, connected to the proxy");

  show("program: tools/list", "");
  show("  → tools", (await program.listTools()).tools.map((tool) => tool.name).join(", "));
  show("program: resources/list", "");
  show("  → resources", (await program.listResources()).resources.map((resource) => resource.uri).join(", "));
  show("program: resources/read", "note://welcome");
  show("  → text", (await program.readResource({ uri: "note://welcome" })).contents.map((content) => ("text" in content ? content.text : "[blob]")).join(" "));
  show("program: tools/call", "add {a: 19, b: 23}");
  show("  → result", textOf(await program.callTool({ name: "add", arguments: { a: 19, b: 23 } })));
  // The notification stream was asked after the first exchange; give its path a moment to open,
  // since a notification sent while no stream is open is not replayed.
  await new Promise((resolve) => setTimeout(resolve, 200));
  show("program: tools/call", 'shout {text: "hello, provider"}');
  show("  → result", textOf(await program.callTool({ name: "shout", arguments: { text: "hello, provider" } })));
  await Promise.race([notification, new Promise((resolve) => setTimeout(resolve, 2000))]);
  show("program: tools/call", "add {a: \"nineteen\"} (bad arguments)");
  try {
    const result = await program.callTool({ name: "add", arguments: { a: "nineteen" } });
    show("  → result", `${result.isError ? "tool error: " : ""}${textOf(result)}`);
  } catch (error) {
    show("  → MCP error", error instanceof McpError ? `${error.code} ${error.message}` : String(error));
  }

  await program.close();
  await provider.close();
  await relay.close();
  await proxy.close();
  await mcpServer.close();
}

async function main(): Promise<void> {
  await runPathsDemo();
  await runBeginDemo();
  await runBridgeDemo();
  await runVaultDemo();
  await runFilesystemDemo();
  await runAgentsDemo();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
