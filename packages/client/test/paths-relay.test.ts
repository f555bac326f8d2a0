// End to end, every piece real: a program (MCP SDK client) → the proxy's /mcp → /requests → the
// provider (connectProxy + relayToMcp) → an MCP server (the SDK's, over Streamable HTTP or stdio).
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, relayToMcp, type McpTarget } from "../src/index.js";
import { delay, programClient, rejection, startUpstreamMcp, type UpstreamMcp } from "./paths-helpers.js";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function chain(target: McpTarget | ((upstream: UpstreamMcp) => McpTarget) = (upstream) => ({ url: upstream.url })) {
  const upstream = await startUpstreamMcp();
  cleanups.push(() => upstream.close());
  const proxy: RunningProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  cleanups.push(() => proxy.close());
  const relay = relayToMcp(typeof target === "function" ? target(upstream) : target);
  cleanups.push(() => relay.close());
  const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay, { minBackoffMs: 10 });
  cleanups.push(() => connection.close());
  await connection.whenConnected();
  const program = await programClient(proxy.programPort);
  cleanups.push(() => program.close());
  return { upstream, proxy, relay, connection, program };
}

/** The outcome of a call, in a form two calls can be compared by. */
async function outcome(call: Promise<unknown>): Promise<unknown> {
  try {
    return { result: await call };
  } catch (error) {
    return error instanceof McpError ? { code: error.code, message: error.message, data: error.data } : { other: String(error) };
  }
}

async function directClient(url: string): Promise<Client> {
  const client = new SdkClient({ name: "direct", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return client;
}

describe("relayToMcp end to end over Streamable HTTP", () => {
  it("gives the program what the MCP server gives a direct client: results and MCP errors alike", async () => {
    const { upstream, program } = await chain();
    const direct = await directClient(upstream.url);
    const calls: ((client: Client) => Promise<unknown>)[] = [
      (client) => client.listTools(),
      (client) => client.listResources(),
      (client) => client.callTool({ name: "add", arguments: { a: 2, b: 40 } }),
      (client) => client.callTool({ name: "echo", arguments: { id: "e-1" } }),
      (client) => client.readResource({ uri: "note://greeting" }),
      (client) => client.callTool({ name: "refuse", arguments: {} }),
      (client) => client.callTool({ name: "no-such-tool", arguments: {} }),
      (client) => client.callTool({ name: "add", arguments: { a: "not a number" } }),
      (client) => client.readResource({ uri: "note://missing" }),
    ];
    for (const call of calls) expect(await outcome(call(program))).toEqual(await outcome(call(direct)));
    expect(await outcome(program.callTool({ name: "add", arguments: { a: 2, b: 40 } }))).toEqual({ result: { content: [{ type: "text", text: "42" }] } });
    const refused = (await rejection(program.callTool({ name: "refuse", arguments: {} }))) as McpError;
    expect([refused.code, refused.data]).toEqual([-32042, { reason: "test" }]);
  });

  it("relays the MCP server's notifications to the program, in order, and never one sent while no stream was open", async () => {
    const upstream = await startUpstreamMcp();
    cleanups.push(() => upstream.close());
    const relay = relayToMcp({ url: upstream.url });
    cleanups.push(() => relay.close());
    // The relay's MCP session exists before any proxy asks for notifications: what the server sends
    // now has no stream to go to, and is not kept for later.
    await relay.listTools!(null, { channel: 0, path: "/mcp/list-tools/0" });
    await waitFor(() => upstream.openStreams() === 1);
    await upstream.notify({ method: "notifications/message", params: { level: "info", data: "before any stream" } });

    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
    cleanups.push(() => proxy.close());
    const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay);
    cleanups.push(() => connection.close());
    const program = await programClient(proxy.programPort);
    cleanups.push(() => program.close());
    const heard: unknown[] = [];
    program.fallbackNotificationHandler = async (notification) => void heard.push(notification.params);
    await program.listTools(); // the first exchange: now the proxy asks for notifications
    for (let n = 0; heard.length === 0 && n < 200; n++) {
      await upstream.notify({ method: "notifications/message", params: { level: "info", data: "warm-up" } });
      await delay(15);
    }
    expect(heard.length).toBeGreaterThan(0);
    // Warm-ups sent before the first was heard may still be on their way: only what follows counts.
    const numbered = () => heard.filter((params) => (params as { data?: unknown }).data !== "warm-up");
    heard.length = 0;
    for (let i = 1; i <= 5; i++) await upstream.notify({ method: "notifications/message", params: { level: "info", data: `n${i}` } });
    await waitFor(() => numbered().length >= 5);
    await delay(50);
    expect(numbered()).toEqual([1, 2, 3, 4, 5].map((i) => ({ level: "info", data: `n${i}` })));
    const everything = JSON.stringify(heard);
    expect(everything).not.toContain("before any stream");
  });

  it("answers -32603 when the MCP server cannot be reached", async () => {
    const { program } = await chain({ url: "http://127.0.0.1:9/mcp" });
    const error = (await rejection(program.listTools())) as McpError;
    expect(error).toBeInstanceOf(McpError);
    expect(error.code).toBe(-32603);
  });

  it("reaches the MCP server again after it restarted: a fresh session at once (the 404 is not the program's error)", async () => {
    const { upstream, program } = await chain();
    expect((await program.callTool({ name: "add", arguments: { a: 1, b: 1 } })).content).toEqual([{ type: "text", text: "2" }]);
    // The server restarts on the same port and forgets every session.
    const port = Number(new URL(upstream.url).port);
    await upstream.close();
    const restarted = await startUpstreamMcp(port);
    cleanups.push(() => restarted.close());
    expect((await program.callTool({ name: "add", arguments: { a: 2, b: 2 } })).content).toEqual([{ type: "text", text: "4" }]);
    expect((await program.callTool({ name: "add", arguments: { a: 3, b: 3 } })).content).toEqual([{ type: "text", text: "6" }]);
    expect(restarted.runs.get("add")).toBe(2);
    // The notification stream carried on through the restart: the relay dialled a fresh session.
    const heard: unknown[] = [];
    program.fallbackNotificationHandler = async (notification) => void heard.push(notification.params);
    for (let n = 0; heard.length === 0 && n < 200; n++) {
      await restarted.notify({ method: "notifications/message", params: { level: "info", data: "after restart" } });
      await delay(15);
    }
    expect(heard[0]).toEqual({ level: "info", data: "after restart" });
  });
});

describe("relayToMcp when the MCP server restarts", () => {
  it("keeps the notification stream going with no exchange in between: it dials a fresh session", async () => {
    const { upstream, program } = await chain();
    const heard: unknown[] = [];
    program.fallbackNotificationHandler = async (notification) => void heard.push(notification.params);
    await program.listTools();
    const port = Number(new URL(upstream.url).port);
    await upstream.close();
    const restarted = await startUpstreamMcp(port);
    cleanups.push(() => restarted.close());
    // The SDK retries the old session's stream after about a second, learns it is gone, and the
    // relay dials again; until then notifications have nowhere to go.
    for (let n = 0; heard.length === 0 && n < 400; n++) {
      await restarted.notify({ method: "notifications/message", params: { level: "info", data: "restarted" } });
      await delay(20);
    }
    expect(heard[0]).toEqual({ level: "info", data: "restarted" });
    expect(restarted.runs.size).toBe(0);
  });
});

describe("relayToMcp end to end over stdio", () => {
  it("spawns the command, relays its tools, resources and notifications", async () => {
    const script = fileURLToPath(new URL("./paths-stdio-server.mjs", import.meta.url));
    const { program } = await chain({ command: process.execPath, args: [script] });
    const heard: unknown[] = [];
    program.fallbackNotificationHandler = async (notification) => void heard.push(notification);
    expect((await program.listTools()).tools.map((tool) => tool.name)).toEqual(["reverse"]);
    expect((await program.readResource({ uri: "note://motd" })).contents).toEqual([{ uri: "note://motd", text: "stdio says hi" }]);
    for (let n = 0; heard.length === 0 && n < 100; n++) {
      expect((await program.callTool({ name: "reverse", arguments: { text: "diverge" } })).content).toEqual([{ type: "text", text: "egrevid" }]);
      await delay(20);
    }
    expect(heard[0]).toMatchObject({ method: "notifications/message", params: { level: "info", data: "reversing 7 characters" } });
  });
});

describe("diverge answer", () => {
  const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });
  function run(args: string[]) {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exit = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
    return { child, exit, stderr: () => stderr };
  }

  it("prints its usage with --help and refuses a missing MCP server", async () => {
    const help = await run(["answer", "--help"]).exit;
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("diverge answer --proxy ws://127.0.0.1:14979 --mcp http://127.0.0.1:3000/mcp");
    expect((await run(["answer", "--proxy", "ws://127.0.0.1:1"]).exit).code).toBe(2);
    expect((await run(["answer", "--mcp", "http://x", "--", "node"]).exit).code).toBe(2);
    const top = await run(["--help"]).exit;
    expect(top.stdout).toContain("answer");
  });

  it("relays a proxy's asks to an MCP server until interrupted", async () => {
    const upstream = await startUpstreamMcp();
    cleanups.push(() => upstream.close());
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
    cleanups.push(() => proxy.close());
    const { child, exit, stderr } = run(["answer", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--mcp", upstream.url]);
    await waitFor(() => stderr().includes("connected to"), 10_000);
    const program = await programClient(proxy.programPort);
    cleanups.push(() => program.close());
    expect((await program.callTool({ name: "add", arguments: { a: 20, b: 22 } })).content).toEqual([{ type: "text", text: "42" }]);
    expect(stderr()).toMatch(/ask \d+: McpCallTool/);
    child.kill("SIGINT");
    expect((await exit).code).toBe(0);
  });

  it("--command-exec runs each command with the executable: stdout lines are items, a failing exit the error", async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
    cleanups.push(() => proxy.close());
    const dir = mkdtempSync(join(tmpdir(), "diverge-answer-exec-"));
    const exe = join(dir, "echo-lines.mjs");
    writeFileSync(exe, `#!${process.execPath}\nlet s = "";\nprocess.stdin.on("data", (c) => (s += c)).on("end", () => { process.stdout.write(s.split(" ").join("\\n") + "\\n"); process.exit(s.startsWith("bad") ? 7 : 0); });\n`);
    chmodSync(exe, 0o755);
    const { child, exit, stderr } = run(["answer", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--command-exec", exe]);
    await waitFor(() => stderr().includes("connected to"), 10_000);
    expect(stderr()).toContain(`commands run ${exe}`);
    const lines = async (body: string) => (await (await fetch(`http://127.0.0.1:${proxy.programPort}/command`, { method: "POST", body })).text()).trim().split("\n").map((l) => JSON.parse(l));
    const b64 = (t: string) => Buffer.from(t).toString("base64");
    expect(await lines("a b")).toEqual([{ item: b64("a") }, { item: b64("b") }, { end: "done" }]);
    expect(await lines("bad x")).toEqual([{ item: b64("bad") }, { item: b64("x") }, { end: "error", error: { exit: 7, stderr: "" } }]);
    child.kill("SIGINT");
    expect((await exit).code).toBe(0);
  });

  it("relays to a stdio MCP server given after --", async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
    cleanups.push(() => proxy.close());
    const script = fileURLToPath(new URL("./paths-stdio-server.mjs", import.meta.url));
    const { child, exit, stderr } = run(["answer", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--", process.execPath, script]);
    await waitFor(() => stderr().includes("connected to"), 10_000);
    const program = await programClient(proxy.programPort);
    cleanups.push(() => program.close());
    expect((await program.callTool({ name: "reverse", arguments: { text: "abc" } })).content).toEqual([{ type: "text", text: "cba" }]);
    child.kill("SIGTERM");
    expect((await exit).code).toBe(0);
  });
});

async function waitFor(check: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await delay(10);
  }
}
