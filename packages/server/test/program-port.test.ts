// The program-facing port as a good MCP server citizen (issue 13; issue 12 defects 5 and 10): hostile
// Host and Origin refused before anything is relayed, sessions released when their client goes, and
// the built binary stopping within a second with calls to the program outstanding.
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
    const { proxy, requests } = await proxyWith({ programSessionIdleMs: 300 });
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
    const deadline = Date.now() + 5000;
    while (proxy.paths.programMcp.sessionCount > 0 && Date.now() < deadline) await delay(50);
    expect(proxy.paths.programMcp.sessionCount).toBe(0);
    // 300 sessions held cost about 12 MB of heap; released, the heap is back near where it began.
    const grown = heapAfterCollection() - heapBefore;
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    // A notification now goes to no dead session (it would fail quietly per session before).
    stream.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/tools/list_changed" } }));
    await delay(50);
    expect(most).toBeGreaterThan(0);
    // 400 SDK sessions made and closed: ~10 s on a quiet machine, 27 s seen under CI's full load.
  }, 120_000);

  it("keeps a session that has a request in flight or a stream open, and releases an idle one after the bound", async () => {
    const { proxy, requests } = await proxyWith({ programSessionIdleMs: 400 });
    const port = proxy.programPort;
    // A raw session with no notification stream: idle after its initialize.
    const answer = await raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`), body: INITIALIZE });
    expect(proxy.paths.programMcp.sessionCount).toBe(1);
    void answer;
    await delay(700);
    expect(proxy.paths.programMcp.sessionCount).toBe(0);
    // An SDK client whose call waits longer than the bound keeps its session.
    const client = new Client({ name: "slow", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
    cleanups.push(() => client.close());
    const tools = client.listTools();
    const ask = await requests.nextExchange();
    await delay(900);
    expect(proxy.paths.programMcp.sessionCount).toBe(1);
    await answerPath(proxy.port, pathOf(ask), encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } }));
    expect((await tools).tools).toEqual([]);
    // Its notification stream is open: it stays past the bound.
    await delay(900);
    expect(proxy.paths.programMcp.sessionCount).toBe(1);
  });
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
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
      cleanups.push(() => client.close());
      clients.push(client);
    }
    await delay(100);
    expect(proxy.paths.programMcp.sessionCount).toBe(3);
    expect((await raw(port, { headers: mcpHeaders(`127.0.0.1:${port}`), body: INITIALIZE })).status).toBe(503);
    await clients[0]!.ping();
  });
});

describe("diverge-proxy stops within a second with calls to the program outstanding (issue 12, defect 5)", () => {
  const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

  /** A program that accepts every request and never answers /register, /secrets or /mcp (unless told to answer /register). */
  async function silentProgram(answerRegister: boolean): Promise<{ port: number; seen: string[] }> {
    const seen: string[] = [];
    const server: Server = createServer((request, response) => {
      seen.push(`${request.method} ${request.url}`);
      request.resume();
      if (answerRegister && request.url === "/register") response.writeHead(200, { "content-type": "application/json" }).end("[]");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return { port: (server.address() as AddressInfo).port, seen };
  }

  async function runProxy(appPort: number): Promise<{ child: ChildProcess; port: number; exit: Promise<number | null> }> {
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(appPort), "--no-secrets-gate", "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
    cleanups.push(() => void child.kill("SIGKILL"));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const line = await new Promise<string>((resolve) => child.stdout!.on("data", (chunk: Buffer) => resolve(chunk.toString())));
    return { child, port: Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]), exit };
  }

  async function stopsWithin(child: ChildProcess, exit: Promise<number | null>, signal: NodeJS.Signals): Promise<number> {
    const started = Date.now();
    child.kill(signal);
    const code = await Promise.race([exit, delay(3000).then(() => "still running")]);
    expect(code).toBe(0);
    return Date.now() - started;
  }

  it("--allow-host and --allow-origin widen what the program port accepts", async () => {
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet", "--allow-host", "box.internal", "--allow-origin", "https://app.example.com"], { stdio: ["ignore", "pipe", "pipe"] });
    cleanups.push(() => void child.kill("SIGKILL"));
    const line = await new Promise<string>((resolve) => child.stdout!.on("data", (chunk: Buffer) => resolve(chunk.toString())));
    const port = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)![1]);
    expect((await raw(port, { headers: mcpHeaders(`box.internal:${port}`, { origin: "https://app.example.com" }), body: INITIALIZE })).status).toBe(200);
    expect((await raw(port, { headers: mcpHeaders(`evil.example.com:${port}`), body: INITIALIZE })).status).toBe(403);
    expect((await raw(port, { headers: mcpHeaders(`box.internal:${port}`, { origin: "https://evil.example.com" }), body: INITIALIZE })).status).toBe(403);
  });

  it("with /register unanswered", async () => {
    const program = await silentProgram(false);
    const { child, port, exit } = await runProxy(program.port);
    const conn = await rawConnect(port);
    conn.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: null } }) });
    while (!program.seen.includes("POST /register")) await delay(10);
    expect(await stopsWithin(child, exit, "SIGTERM")).toBeLessThan(1000);
    conn.socket.terminate();
  });

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
    expect(await stopsWithin(child, exit, "SIGINT")).toBeLessThan(1000);
    conn.socket.terminate();
  });
});
