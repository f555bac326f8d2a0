// The agent-container part of `pnpm demo` (issue 28): the example agent program behind a proxy, on
// both transports. A provider begins it (agents::begin on /, or /agent/register on paths), sends a
// message whose loop calls a tool of the provider's MCP server through the proxy's /mcp, queues a
// second message mid-loop (taken at a seam), queues a third and dequeues it, and prints the loop's
// chunks folded into whole messages as they come. Then the same agent program behind
// `diverge connect --serve-agent`, asked by the A2A SDK's own client with no Diverge code.
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { z } from "zod";
import { A2AClient } from "@a2a-js/sdk/client";
import type { MessageSendParams } from "@a2a-js/sdk";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { beginPathsAgent, ChunkFold, connectProxy, mcpProviderHandlers, openContainer, relayToMcp, type Agent, type FoldedMessage } from "@diverge/client";
import { exampleAgentRoot, startExampleAgent, type ExampleAgent } from "@diverge/example-agent";
import { startProxy, type RunningProxy } from "@diverge/server";

const cli = join(dirname(createRequire(import.meta.url).resolve("@diverge/client/package.json")), "dist", "cli.js");

function show(label: string, value: unknown): void {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s+/g, " ");
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

/** The provider's MCP server: the tool the agent's loop calls through the proxy. */
async function startToolServer(): Promise<{ url: string; calls: string[]; close(): Promise<void> }> {
  const calls: string[] = [];
  const build = () => {
    const server = new McpServer({ name: "provider-tools", version: "1.0.0" });
    server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
      calls.push(`add ${a} ${b}`);
      return { content: [{ type: "text", text: String(a + b) }] };
    });
    return server;
  };
  const sessions = new Map<string, { server: McpServer; transport: StreamableHTTPServerTransport }>();
  const http = createServer(async (request, response) => {
    try {
      const body = request.method === "POST" ? JSON.parse(await readAll(request)) : undefined;
      const id = request.headers["mcp-session-id"];
      let session = typeof id === "string" ? sessions.get(id) : undefined;
      if (!session) {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => void sessions.set(sessionId, session!),
        });
        session = { server: build(), transport };
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
    calls,
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

/** One line for a whole folded message. */
function describe(message: FoldedMessage): [string, string] {
  switch (message.kind) {
    case "user":
      return [`  ← user ${message.key}`, message.content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join(" ")];
    case "text":
    case "reasoning":
    case "refusal":
      return [`  ← ${message.kind}`, message.text];
    case "tool_call":
      return ["  ← tool call", `${message.id} ${message.name} ${message.arguments}`];
    case "tool_response":
      return ["  ← tool result", `${message.id} ${message.isError ? "error " : ""}${message.content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join(" ")}`];
    case "notification":
      return ["  ← notification", JSON.stringify(message.message)];
    default:
      return [`  ← ${message.kind}`, ""];
  }
}

/** A proxy in front of a fresh example agent, whose tool calls go to the proxy's program-facing /mcp. */
async function agentContainer(secretsGate: boolean): Promise<{ proxy: RunningProxy; program: ExampleAgent }> {
  let proxy: RunningProxy | undefined;
  const program = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${proxy!.programPort}/mcp` });
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, root: exampleAgentRoot, secretsGate, log: () => {} });
  return { proxy, program };
}

async function library(transport: "multiplexed" | "paths"): Promise<void> {
  process.stdout.write(`\nAn agent container on the ${transport} transport (${transport === "multiplexed" ? "agents::begin on /" : "/agent/*"})\n`);
  const tools = await startToolServer();
  const relay = relayToMcp({ url: tools.url });
  // No path carries a secrets feed: on paths the proxy runs without the gate.
  const { proxy, program } = await agentContainer(transport === "multiplexed");
  show("agent program", `the example agent at :${program.port}; proxy ws://127.0.0.1:${proxy.port}/`);
  const closers: (() => Promise<unknown> | unknown)[] = [() => proxy.close(), () => program.close(), () => relay.close(), () => tools.close()];
  try {
    let agent: Agent;
    if (transport === "multiplexed") {
      // The agent's tool calls come back on the scope's proxy-opened MCP channels: relay them to the MCP server.
      const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { handlers: mcpProviderHandlers(relay) });
      closers.unshift(() => connection.close());
      agent = await connection.beginAgent({ arguments: { name: "demo-agent" } });
      show("begun", `agents::begin; declared tools: ${JSON.stringify(agent.tools)}`);
      show("info front matter", (await agent.info())?.frontMatter ?? "none");
      await agent.feedSecrets({ API_KEY: "demo-key" });
      show("secrets", "fed (tag 5): the gate lets enqueues through");
    } else {
      // On paths the agent's tool calls come to the provider as /requests asks.
      const answering = connectProxy(`ws://127.0.0.1:${proxy.port}/`, relay);
      closers.unshift(() => answering.close());
      await answering.whenConnected();
      const paths = await beginPathsAgent(`ws://127.0.0.1:${proxy.port}/`, { arguments: { name: "demo-agent" } });
      closers.unshift(() => paths.close());
      agent = paths;
      show("begun", "/agent/register; the provider answers the agent's MCP asks on /requests");
      show("info (schema)", (await agent.info())?.frontMatter ?? "none");
    }

    // The loop's chunks, folded: each whole message printed once it is complete.
    const fold = new ChunkFold();
    const counts = new Map<string, number>();
    const printer = (async () => {
      for await (const chunk of agent.chunks()) {
        counts.set(chunk.type, (counts.get(chunk.type) ?? 0) + 1);
        for (const step of fold.add(chunk)) if (step.type === "completed") show(...describe(step.message));
      }
    })();
    printer.catch(() => {});
    const flush = () => {
      for (const step of fold.finish()) if (step.type === "completed") show(...describe(step.message));
    };

    const first = 'hello\npause:a\ntool:add {"a":19,"b":23}';
    show("enqueue m1", first);
    const m1 = agent.enqueue("m1", first);
    await program.whenPaused("a");
    show("  fate m1", await m1);
    show("enqueue m2", "pause:b / thanks (the loop is paused before its tool call)");
    const m2 = agent.enqueue("m2", "pause:b\nthanks");
    await program.whenHeld(1);
    show("  program holds", program.held);
    program.release("a");
    show("  fate m2", `${await m2} (taken at the seam after the tool's result)`);
    await program.whenPaused("b");
    show("enqueue m3", "never mind (while m2's turn is paused)");
    const m3 = agent.enqueue("m3", "never mind");
    await program.whenHeld(1);
    show("dequeue m3", await agent.dequeue("m3"));
    show("  fate m3", await m3);
    program.release("b");
    await agent.settled({ idleMs: 500 });
    flush();
    show("streamed chunks", [...counts].map(([type, n]) => `${n} ${type}`).join(", "));
    show("usage (summed)", fold.usage);
    show("tool calls served", tools.calls);
    show("program's /run calls", program.runs);
  } finally {
    for (const close of closers) await Promise.resolve(close()).catch(() => {});
  }
}

async function a2a(transport: "multiplexed" | "paths"): Promise<void> {
  process.stdout.write(`\ndiverge connect --serve-agent over the ${transport} transport, asked by an A2A client\n`);
  const tools = await startToolServer();
  const { proxy, program } = await agentContainer(transport === "multiplexed");
  const args = ["connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-agent", "127.0.0.1:0", "--serve-agent-idle-ms", "500", "--mcp", tools.url];
  args.push("--arguments", '{"name":"a2a-agent"}');
  if (transport === "multiplexed") args.push("--secret-env", "API_KEY");
  show("command", `diverge ${args.join(" ")}`);
  const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, API_KEY: "demo-key" } });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  try {
    const deadline = Date.now() + 30_000;
    let url: string | undefined;
    while (!(url = /serving the agent over A2A at (\S+) /.exec(stderr)?.[1])) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`diverge connect --serve-agent did not start serving: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    show("serving at", url);
    const client = await A2AClient.fromCardUrl(`${url}.well-known/agent-card.json`);
    const card = await client.getAgentCard();
    show("agent card", `${card.name}: skills ${card.skills.map((skill) => skill.id).join(", ")}; streaming ${card.capabilities.streaming}`);
    const params = (text: string): MessageSendParams => ({ message: { kind: "message", role: "user", messageId: randomUUID(), parts: [{ kind: "text", text }] } });
    show("a2a: message/stream", 'hi\ntool:add {"a":2,"b":3}');
    let text = "";
    const states: string[] = [];
    for await (const event of client.sendMessageStream(params('hi\ntool:add {"a":2,"b":3}'))) {
      if (event.kind === "task" || event.kind === "status-update") {
        if (states.at(-1) !== event.status.state) states.push(event.status.state);
        const part = event.status.message?.parts[0];
        if (event.kind === "status-update" && part?.kind === "text" && !event.final) show(`  status ${event.status.state}`, part.text);
      }
      if (event.kind === "artifact-update" && event.artifact.artifactId === "response") text += event.artifact.parts.map((part) => (part.kind === "text" ? part.text : "")).join("");
    }
    show("  task states", states.join(" → "));
    show("  response artifact", text);
    show("a2a: message/send", "how are you");
    const sent = await client.sendMessage(params("how are you"));
    if ("error" in sent) throw new Error(`message/send failed: ${JSON.stringify(sent.error)}`);
    const task = sent.result;
    show("  → task", task.kind === "task" ? `${task.status.state}: ${task.status.message?.parts.map((part) => (part.kind === "text" ? part.text : "")).join("")}` : task.kind);
    show("tool calls served", tools.calls);
  } finally {
    child.kill("SIGTERM");
    show("connect exited", `status ${await exited} (SIGTERM)`);
    await proxy.close();
    await program.close();
    await tools.close();
  }
}

export async function runAgentsDemo(): Promise<void> {
  await library("multiplexed");
  await library("paths");
  await a2a("multiplexed");
  await a2a("paths");
}
