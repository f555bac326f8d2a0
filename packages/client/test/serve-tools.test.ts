// `diverge connect --serve-tools` as agents meet it, on both transports: the container's list-changed
// notifications reach every agent session (the MCP SDK client's own notification handlers), and the
// sessions are bounded: a cap (an extra session is refused with HTTP 503 saying why) and an idle time
// (a quiet session is closed). The same session book as the proxy's program /mcp (@diverge/multiplexer).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceListChangedNotificationSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

async function fixture(): Promise<{ app: ExampleContainer; proxy: RunningProxy }> {
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

/** `diverge connect --serve-tools 127.0.0.1:0` on `transport`, with `extra` flags; resolves with its MCP URL. */
async function serveTools(proxy: RunningProxy, transport: Transport, extra: string[] = []): Promise<{ url: string; stderr: () => string; child: ChildProcess }> {
  const begin = transport === "multiplexed" ? ["--arguments", '{"greeting":"Hey"}'] : [];
  const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, ...begin, "--serve-tools", "127.0.0.1:0", ...extra], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  // A hang guard: a loaded machine takes seconds to start the command and begin.
  const deadline = Date.now() + 90_000;
  for (;;) {
    const url = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0];
    if (url) return { url, stderr: () => stderr, child };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`connect did not serve tools; exit ${child.exitCode}; stderr:\n${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function agent(url: string): Promise<{ client: Client; seen: string[] }> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  const seen: string[] = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, (notification) => void seen.push(notification.method));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, (notification) => void seen.push(notification.method));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return { client, seen };
}

async function until(condition: () => boolean, what: string, ms = 60_000, tick?: () => void): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    tick?.();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** An `initialize` as a raw HTTP request: the status, and the session id when one was made. */
async function initialize(url: string): Promise<{ status: number; session?: string; body: string }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  return { status: response.status, session: response.headers.get("mcp-session-id") ?? undefined, body: await response.text() };
}

async function listTools(url: string, session: string): Promise<number> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  await response.text();
  return response.status;
}

/** A session made with a raw `initialize`, holding its notification stream (a GET) open until `close`. */
async function busySession(url: string): Promise<{ session: string; close(): void }> {
  const made = await initialize(url);
  expect(made.status).toBe(200);
  const controller = new AbortController();
  cleanups.push(async () => controller.abort());
  const stream = await fetch(url, { method: "GET", headers: { accept: "text/event-stream", "mcp-session-id": made.session!, "mcp-protocol-version": "2025-06-18" }, signal: controller.signal });
  expect(stream.status).toBe(200);
  return { session: made.session!, close: () => controller.abort() };
}

describe("diverge connect --serve-tools: the container's list-changed notifications", () => {
  for (const transport of TRANSPORTS) {
    it(`reach every connected agent session — ${transport}`, { timeout: 120_000 }, async () => {
      const { app, proxy } = await fixture();
      const { url } = await serveTools(proxy, transport);
      const agents = await Promise.all([agent(url), agent(url), agent(url)]);
      // The bridge subscribes to the container's notifications once, at its start; an agent's stream
      // opens a moment after its initialize. Sent again until every session has both (no replay).
      const both = (seen: string[]) => seen.includes("notifications/tools/list_changed") && seen.includes("notifications/resources/list_changed");
      await until(() => agents.every(({ seen }) => both(seen)), "every agent to see both list-changed notifications", 20_000, () => app.listChanged());
      // What is not relayed (a log message of a call) reaches no agent as a list change.
      for (const { seen } of agents) expect(new Set(seen)).toEqual(new Set(["notifications/tools/list_changed", "notifications/resources/list_changed"]));
    });
  }
});

describe("diverge connect --serve-tools: bounded sessions", () => {
  it("refuses a session beyond --serve-tools-max-sessions with HTTP 503 when every one is busy", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const { url } = await serveTools(proxy, "paths", ["--serve-tools-max-sessions", "2"]);
    // Two sessions, each holding its notification stream open (as the SDK's client does): busy. The
    // stream's 200 means the server counts it already.
    const held = [await busySession(url), await busySession(url)];
    const refused = await initialize(url);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: -32603, message: "all 2 sessions are busy (the limit of --serve-tools-max-sessions); close one, or try again later" } });
    // The two held go on.
    for (const { session } of held) expect(await listTools(url, session)).toBe(200);
    // A session whose stream closed is quiet: it gives its place to a new one (a 503 takes no place,
    // so asking until the close has reached the server is safe).
    held[0]!.close();
    let taken = await initialize(url);
    for (let deadline = Date.now() + 90_000; taken.status === 503 && Date.now() < deadline; taken = await initialize(url)) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(taken.status).toBe(200);
    expect(await listTools(url, held[0]!.session)).toBe(404);
    expect(await listTools(url, held[1]!.session)).toBe(200);
    // And an MCP SDK client is served as any other.
    held[1]!.close();
    const { client } = await agent(url);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("closes a session idle for --serve-tools-idle-seconds", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const { url, stderr } = await serveTools(proxy, "multiplexed", ["--serve-tools-idle-seconds", "1"]);
    const made = await initialize(url);
    expect(made.status).toBe(200);
    expect(await listTools(url, made.session!)).toBe(200);
    // Nothing in flight, no stream: after a second the session is gone.
    await until(() => stderr().includes(`MCP session ${made.session} closed: idle`), "the idle session to close", 10_000);
    expect(await listTools(url, made.session!)).toBe(404);
    // A session in use is not closed: one that keeps its notification stream open outlives the idle time.
    const busy = await busySession(url);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await listTools(url, busy.session)).toBe(200);
  });

  it("refuses flags that bound nothing or are not numbers (exit 2)", { timeout: 120_000 }, async () => {
    const status = (args: string[]) =>
      new Promise<number | null>((resolve) => {
        const child = spawn("node", [cli, "connect", ...args], { stdio: "ignore" });
        child.once("exit", (code) => resolve(code));
      });
    expect(await status(["--serve-tools-max-sessions", "2"])).toBe(2);
    expect(await status(["--serve-tools", "127.0.0.1:0", "--serve-tools-max-sessions", "zero"])).toBe(2);
    expect(await status(["--serve-tools", "127.0.0.1:0", "--serve-tools-idle-seconds", "-1"])).toBe(2);
  });
});

describe("--serve-tools bounds the request body", () => {
  it.each(TRANSPORTS)("on %s: a body over 16 MiB is answered 413 (a JSON-RPC error naming the limit) at once, and the connection ends", async (transport) => {
    const { proxy } = await fixture();
    const { url } = await serveTools(proxy, transport);
    const target = new URL(url);
    const { connect } = await import("node:net");
    // Only the head, declaring a body of 1 GiB: the answer comes with none of it sent.
    const socket = connect(Number(target.port), target.hostname);
    cleanups.push(async () => void socket.destroy());
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write(`POST /mcp HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${1024 ** 3}\r\n\r\n`);
    await closed;
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received.toLowerCase()).toContain("connection: close");
    const error = JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)) as { error: { code: number; message: string } };
    expect(error.error.code).toBe(-32600);
    expect(error.error.message).toContain(`limit of ${16 * 1024 * 1024} bytes`);
  }, 120_000);
});
