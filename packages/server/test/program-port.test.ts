// The program-facing port as a good MCP server citizen (issue 13; issue 12 defects 5 and 10): hostile
// Host and Origin refused before anything is relayed, sessions released when their client goes, and
// the built binary stopping with calls to the program outstanding.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { encodeContainerProxyRequest, encodeMcpListToolsAnswer, encodeMcpNotificationsAnswer, encodeToolsBeginChannelRequest } from "@diverge/codec";
import type { ProxyOptions, RunningProxy } from "../src/index.js";
import { onScope, rawConnect } from "./multiplexed-support.js";
import { answerPath, delay, openWs, pathOf, RequestsLine, testProxy } from "./paths-helpers.js";

const cleanups: (() => Promise<unknown> | void)[] = [];

/** Heap in use after a full collection (node's gc, exposed at run time). */
function heapAfterCollection(): number {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A bound on waiting for a condition: a hang guard for a loaded machine, not a speed target. */
const PATIENCE_MS = 60_000;

/** Waits until `check` holds, or fails naming `what`. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await delay(20);
  }
}

/** An SDK client transport that tells when its notification stream (the GET) has been answered: the proxy holds it open from then on. */
function streamingTransport(url: URL): { transport: StreamableHTTPClientTransport; streaming: Promise<void> } {
  let opened!: () => void;
  const streaming = new Promise<void>((resolve) => (opened = resolve));
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      if ((init?.method ?? "GET") === "GET" && response.ok) opened();
      return response;
    },
  });
  return { transport, streaming };
}

async function proxyWith(options: ProxyOptions = {}): Promise<{ proxy: RunningProxy; requests: RequestsLine }> {
  const proxy = await testProxy(options);
  cleanups.push(() => proxy.close());
  const requests = await RequestsLine.open(proxy.port);
  cleanups.push(() => requests.socket.terminate());
  return { proxy, requests };
}

const INITIALIZE = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
const CALL = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "steal", arguments: {} } });

/** One raw HTTP request with exactly the headers given (Host included); resolves with status and body. */
function raw(port: number, options: { method?: string; path?: string; headers: Record<string, string>; body?: string }): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method: options.method ?? "POST", path: options.path ?? "/mcp", headers: options.headers, setHost: false });
    req.on("response", (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body, headers: response.headers }));
    });
    req.on("upgrade", (response, socket) => {
      socket.destroy();
      resolve({ status: response.statusCode ?? 0, body: "", headers: response.headers });
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const mcpHeaders = (host: string, extra: Record<string, string> = {}) => ({ host, "content-type": "application/json", accept: "application/json, text/event-stream", ...extra });

describe("Host and Origin on the program port", () => {
  it("refuses a hostile Host or Origin with 403 on /mcp and /daemon, and relays nothing", async () => {
    const { proxy, requests } = await proxyWith();
    const port = proxy.programPort;
    // An initialize and a call a DNS-rebinding page would make.
    for (const headers of [
      mcpHeaders(`evil.example.com:${port}`),
      mcpHeaders(`evil.example.com`),
      mcpHeaders(`127.0.0.1:${port}`, { origin: "http://evil.example.com" }),
      mcpHeaders(`localhost:${port}`, { origin: "null" }),
      mcpHeaders(`127.0.0.1@evil.example.com:${port}`),
      mcpHeaders(`evil.example.com@127.0.0.1:${port}`),
    ]) {
      for (const body of [INITIALIZE, CALL]) {
        const answer = await raw(port, { headers: { ...headers, "mcp-session-id": "x" }, body });
        expect(answer.status, JSON.stringify(headers)).toBe(403);
        expect(JSON.parse(answer.body)).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 }, id: null });
      }
      const initialize = await raw(port, { headers, body: INITIALIZE });
      expect(initialize.status).toBe(403);
      expect(initialize.headers["mcp-session-id"]).toBeUndefined();
      const upgrade = await raw(port, {
        method: "GET",
        path: "/daemon",
        headers: { ...headers, connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": randomBytes(16).toString("base64") },
      });
      expect(upgrade.status).toBe(403);
    }
    // A request with no Host at all is refused too (Node's HTTP server answers an HTTP/1.1 one 400 itself).
    expect([400, 403]).toContain((await raw(port, { headers: { "content-type": "application/json" }, body: INITIALIZE })).status);
    await delay(100);
    expect(requests.asks).toEqual([]);
    expect(proxy.paths.programMcp.sessionCount).toBe(0);
  });

  it("serves loopback names with any port, and loopback origins", async () => {
    const { proxy, requests } = await proxyWith();
    const port = proxy.programPort;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "localhost", `LOCALHOST:${port}`]) {
      const answer = await raw(port, { headers: mcpHeaders(host, { origin: `http://localhost:3000` }), body: INITIALIZE });
      expect(answer.status, host).toBe(200);
      expect(answer.headers["mcp-session-id"]).toBeTypeOf("string");
    }
    // And the SDK's own client, which sends Host 127.0.0.1:<port>, goes all the way to the provider.
    const client = new Client({ name: "program", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
    cleanups.push(() => client.close());
    const tools = client.listTools();
    const ask = await requests.nextExchange();
    await answerPath(proxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    expect((await tools).tools).toEqual([]);
  });

  it("widens the allowed hosts and origins by option", async () => {
    const { proxy } = await proxyWith({ allowedHosts: ["box.internal"], allowedOrigins: ["https://app.example.com"] });
    const port = proxy.programPort;
    expect((await raw(port, { headers: mcpHeaders(`box.internal:${port}`), body: INITIALIZE })).status).toBe(200);
    expect((await raw(port, { headers: mcpHeaders(`localhost:${port}`, { origin: "https://app.example.com" }), body: INITIALIZE })).status).toBe(200);
    expect((await raw(port, { headers: mcpHeaders(`localhost:${port}`, { origin: "https://app.example.com:8443" }), body: INITIALIZE })).status).toBe(403);
    expect((await raw(port, { headers: mcpHeaders(`other.internal:${port}`), body: INITIALIZE })).status).toBe(403);
  });
});

describe("program MCP sessions (issue 12, defect 10)", () => {
  it("are released when the SDK client closes (no DELETE): 300 cycles leave none behind", async () => {
    // Released by the stream grace once each client's GET ends; an idle bound well above the SDK
    // client's own gaps between its requests on a loaded machine (a shorter one released sessions mid-connect).
    const { proxy, requests } = await proxyWith({ programSessionIdleMs: 10_000 });
    // The notification stream must be open for the proxy to relay anything: answer its ask and keep it.
    const client0 = new Client({ name: "first", version: "1" });
    await client0.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
    const tools = client0.listTools();
    const asks = [await requests.next(), await requests.next()];
    const exchange = asks.find((ask) => ask.variant === "McpListTools")!;
    const notifications = asks.find((ask) => ask.variant === "McpNotifications")!;
    await answerPath(proxy.port, pathOf(exchange), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    await tools;
    await client0.close();
    const stream = await openWs(proxy.port, pathOf(notifications));
    cleanups.push(() => stream.terminate());

    // Warm-up: caches and Node's bounded buffers (250 fetch timings, say) fill before the heap is measured.
    for (let cycle = 0; cycle < 100; cycle++) {
      const client = new Client({ name: `warm-up-${cycle}`, version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
      await client.close();
    }
    const heapBefore = heapAfterCollection();
    let most = 0;
    for (let cycle = 0; cycle < 300; cycle++) {
      const client = new Client({ name: `program-${cycle}`, version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
      await client.close();
      most = Math.max(most, proxy.paths.programMcp.sessionCount);
    }
    await eventually(() => proxy.paths.programMcp.sessionCount === 0, `every session released (${proxy.paths.programMcp.sessionCount} held)`);
    // 300 sessions held cost about 12 MB of heap; released, the heap is back near where it began.
    const grown = heapAfterCollection() - heapBefore;
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    // A notification now goes to no dead session (it would fail quietly per session before).
    stream.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/tools/list_changed" } }));
    await delay(50);
    expect(most).toBeGreaterThan(0);
    // 400 SDK sessions made and closed: ~10 s on a quiet machine, 27 s seen under CI's full load, 263 s beside a load average of 19; the bound is a hang guard.
  }, 600_000);

  it("keeps a session that has a request in flight or a stream open, and releases an idle one after the bound", async () => {
    // The bound is well above the SDK client's own gaps between its requests on a loaded machine.
    const { proxy, requests } = await proxyWith({ programSessionIdleMs: 5000 });
    const port = proxy.programPort;
    const sessions = () => proxy.paths.programMcp.sessionCount;
    /** A raw session, idle from its initialize on: once it is released, a quiet session opened before it would have been too. */
    const idleReference = async () => expect((await raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`), body: INITIALIZE })).status).toBe(200);
    // A raw session with no notification stream: idle after its initialize.
    await idleReference();
    expect(sessions()).toBe(1);
    await eventually(() => sessions() === 0, "the idle session released after its bound");
    // An SDK client whose call waits longer than the bound keeps its session: an idle session opened
    // after the call went out is released, and the client's is still held.
    const client = new Client({ name: "slow", version: "1" });
    const { transport, streaming } = streamingTransport(new URL(`http://127.0.0.1:${port}/mcp`));
    await client.connect(transport);
    cleanups.push(() => client.close());
    const tools = client.listTools();
    const ask = await requests.nextExchange();
    await idleReference();
    expect(sessions()).toBe(2);
    await eventually(() => sessions() < 2, "the idle reference session released");
    expect(sessions()).toBe(1);
    await answerPath(proxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    expect((await tools).tools).toEqual([]);
    // Its notification stream is open: it stays past the bound.
    await streaming;
    await idleReference();
    await eventually(() => sessions() < 2, "the second idle reference session released");
    expect(sessions()).toBe(1);
    await client.ping();
  }, 120_000);
});

describe("program MCP sessions are bounded in number", () => {
  it("releases the oldest quiet session for a new one, and answers 503 when every session is busy", async () => {
    const { proxy } = await proxyWith({ maxProgramSessions: 3 });
    const port = proxy.programPort;
    const ids: string[] = [];
    for (let n = 0; n < 4; n++) {
      const answer = await raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`), body: INITIALIZE });
      expect(answer.status).toBe(200);
      ids.push(String(answer.headers["mcp-session-id"]));
    }
    expect(proxy.paths.programMcp.sessionCount).toBe(3);
    // The first (oldest, quiet) made room: its id is unknown now; the newest is served.
    const ping = (id: string) => raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`, { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" }), body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" }) });
    expect((await ping(ids[0]!)).status).toBe(404);
    expect((await ping(ids[3]!)).status).toBe(200);
    // Three SDK clients hold their notification streams open: busy, none to release.
    const clients: Client[] = [];
    for (let n = 0; n < 3; n++) {
      const client = new Client({ name: `busy-${n}`, version: "1" });
      const { transport, streaming } = streamingTransport(new URL(`http://127.0.0.1:${port}/mcp`));
      await client.connect(transport);
      cleanups.push(() => client.close());
      clients.push(client);
      await streaming;
    }
    expect(proxy.paths.programMcp.sessionCount).toBe(3);
    expect((await raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`), body: INITIALIZE })).status).toBe(503);
    await clients[0]!.ping();
  });
});

// Closing aborts the calls still waiting on the program (before, the proxy waited on them and never
// exited); the test's own timeout is the bound, no measured time (a loaded machine is slow, not wrong).
describe("diverge-proxy stops with calls to the program outstanding (issue 12, defect 5)", () => {
  const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

  /** A program that accepts every request and never answers /register, /secrets or /mcp (unless told to answer /register); `ended` lists the requests whose connection the proxy closed. */
  async function silentProgram(answerRegister: boolean): Promise<{ port: number; seen: string[]; ended: string[] }> {
    const seen: string[] = [];
    const ended: string[] = [];
    const server: Server = createServer((request, response) => {
      seen.push(`${request.method} ${request.url}`);
      request.socket.once("close", () => ended.push(`${request.method} ${request.url}`));
      request.resume();
      if (answerRegister && request.url === "/register") response.writeHead(200, { "content-type": "application/json" }).end("[]");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return { port: (server.address() as AddressInfo).port, seen, ended };
  }

  async function runProxy(appPort: number): Promise<{ child: ChildProcess; port: number; exit: Promise<number | null> }> {
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(appPort), "--no-secrets-gate", "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
    cleanups.push(() => void child.kill("SIGKILL"));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const line = await new Promise<string>((resolve) => child.stdout!.on("data", (chunk: Buffer) => resolve(chunk.toString())));
    return { child, port: Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]), exit };
  }

  /** The exit code once `signal` has stopped the proxy. */
  async function stopsOn(child: ChildProcess, exit: Promise<number | null>, signal: NodeJS.Signals): Promise<number | null> {
    child.kill(signal);
    return exit;
  }

  it("--allow-host and --allow-origin widen what the program port accepts", async () => {
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet", "--allow-host", "box.internal", "--allow-origin", "https://app.example.com"], { stdio: ["ignore", "pipe", "pipe"] });
    cleanups.push(() => void child.kill("SIGKILL"));
    const line = await new Promise<string>((resolve) => child.stdout!.on("data", (chunk: Buffer) => resolve(chunk.toString())));
    const port = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)![1]);
    expect((await raw(port, { headers: mcpHeaders(`box.internal:${port}`, { origin: "https://app.example.com" }), body: INITIALIZE })).status).toBe(200);
    expect((await raw(port, { headers: mcpHeaders(`evil.example.com:${port}`), body: INITIALIZE })).status).toBe(403);
    expect((await raw(port, { headers: mcpHeaders(`box.internal:${port}`, { origin: "https://evil.example.com" }), body: INITIALIZE })).status).toBe(403);
  }, 120_000);

  // In the process itself, with no exit to end the sockets: closing the proxy aborts its call, so
  // the program sees the connection of its unanswered /register end.
  it("the library's close() aborts a /register the program never answers", async () => {
    const program = await silentProgram(false);
    const proxy = await testProxy({ appPort: program.port });
    let closed = false;
    cleanups.push(() => (closed ? undefined : proxy.close()));
    const conn = await rawConnect(proxy.port);
    cleanups.push(() => conn.socket.terminate());
    conn.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: null } }) });
    await eventually(() => program.seen.includes("POST /register"), "the program asked for /register");
    await proxy.close();
    closed = true;
    await eventually(() => program.ended.includes("POST /register"), "the /register call aborted by close()");
  }, 120_000);

  it("with /register unanswered", async () => {
    const program = await silentProgram(false);
    const { child, port, exit } = await runProxy(program.port);
    const conn = await rawConnect(port);
    conn.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: null } }) });
    while (!program.seen.includes("POST /register")) await delay(10);
    expect(await stopsOn(child, exit, "SIGTERM")).toBe(0);
    conn.socket.terminate();
  }, 120_000);

  it("with /secrets and the inward MCP initialize unanswered", async () => {
    const program = await silentProgram(true);
    const { child, port, exit } = await runProxy(program.port);
    const conn = await rawConnect(port);
    conn.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: null } }) });
    await conn.next(onScope(1));
    conn.send({ variant: "ChannelRequest", scope: 1, channel: 1, payload: encodeToolsBeginChannelRequest({ variant: "Secrets", values: { API_KEY: "k" } }) });
    conn.send({ variant: "ChannelRequest", scope: 1, channel: 2, payload: encodeToolsBeginChannelRequest({ variant: "McpListTools", params: null }) });
    conn.send({ variant: "ChannelRequest", scope: 1, channel: 3, payload: encodeToolsBeginChannelRequest({ variant: "McpNotifications" }) });
    while (!(program.seen.includes("POST /secrets") && program.seen.includes("POST /mcp"))) await delay(10);
    expect(await stopsOn(child, exit, "SIGINT")).toBe(0);
    conn.socket.terminate();
  }, 120_000);
});
