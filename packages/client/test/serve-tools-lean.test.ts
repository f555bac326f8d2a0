// The --serve-tools bridge's lean path (relayed requests past the MCP SDK's server), on both
// transports, every piece real: an MCP SDK server as the container's, a proxy before it, the bridge
// (serveToolsHttp with the transport's own source), and an MCP SDK client or raw HTTP in front. What
// the lean path must keep: large results byte for byte, malformed bodies refused with the JSON-RPC
// error they call for, the SDK's header refusals, batches (the SDK's), progress to the request that
// asked (an SSE answer), a cancellation (on paths it reaches the container's server; a begin-scope
// channel cannot be cancelled, multiplexed.md, so there the call is only given up), a session's close.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolResultSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools, serveToolsHttp, type ToolsSource } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

/** A text of `bytes` UTF-8 bytes that JSON must escape in places (quotes, backslashes, line breaks, non-ASCII). */
function bigText(bytes: number): string {
  const unit = 'a "quoted" \\ line\nbreak, é and 😀 ';
  const unitBytes = Buffer.byteLength(unit);
  return unit.repeat(Math.ceil(bytes / unitBytes));
}

interface LeanContainer {
  readonly port: number;
  /** What the container's tools saw: `slow` begun, and `slow:cancelled` once its signal aborted. */
  readonly calls: string[];
  close(): Promise<void>;
}

/** The container program: `/register`, `/secrets`, and `/mcp`, an MCP SDK server with the tools the lean path is tried on. */
async function startLeanContainer(): Promise<LeanContainer> {
  const calls: string[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const pending = new Set<() => void>();
  const makeServer = () => {
    const server = new McpServer({ name: "lean-container", version: "1.0.0" }, { capabilities: { tools: {}, resources: {} } });
    server.registerTool("big", { description: "a text result of about `bytes` bytes, and structured content" }, async () => {
      return { content: [{ type: "text", text: bigText(4 * 1024 * 1024) }], structuredContent: { nested: { list: [1, 2.5, -3e-7, null, true, "ü"] } } };
    });
    server.registerTool("steps", { description: "three progress notifications, then the answer" }, async (extra) => {
      const token = extra._meta?.progressToken;
      for (let step = 1; step <= 3; step++) {
        if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, total: 3, message: `step ${step}` } });
      }
      return { content: [{ type: "text", text: "stepped" }] };
    });
    server.registerTool("slow", { description: "answers only when cancelled" }, async (extra) => {
      calls.push("slow");
      await new Promise<void>((resolve) => {
        pending.add(resolve);
        extra.signal.addEventListener("abort", () => {
          calls.push("slow:cancelled");
          resolve();
        });
      });
      return { content: [{ type: "text", text: "late" }] };
    });
    server.registerTool("quick", { description: "answers at once" }, async () => ({ content: [{ type: "text", text: "quick" }] }));
    server.registerResource("note", "note://one", { mimeType: "text/plain" }, async () => ({ contents: [{ uri: "note://one", text: "one" }] }));
    return server;
  };
  const readBody = (request: IncomingMessage): Promise<string> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      request.on("error", reject);
    });
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (path === "/register" || path === "/secrets") {
      await readBody(request);
      return response.writeHead(200, { "content-type": "application/json" }).end(path === "/register" ? "[]" : "{}");
    }
    if (path !== "/mcp") return response.writeHead(404).end();
    const text = request.method === "POST" ? await readBody(request) : "";
    const body: unknown = text ? JSON.parse(text) : undefined;
    const header = request.headers["mcp-session-id"];
    const id = Array.isArray(header) ? header[0] : header;
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id || !isInitializeRequest(body)) return response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
      const made: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sessionId) => void transports.set(sessionId, made) });
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
    async close() {
      for (const resolve of pending) resolve();
      await Promise.allSettled([...transports.values()].map((transport) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** The container, a proxy before it (its message limit `maxMessageBytes`), and the bridge on `transport`: the bridge's MCP URL and the container's own. */
async function fixture(transport: Transport, maxMessageBytes?: number): Promise<{ url: string; direct: string; app: LeanContainer }> {
  const app = await startLeanContainer();
  cleanups.push(() => app.close());
  const proxy: RunningProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, secretsGate: false, log: () => {}, maxMessageBytes });
  cleanups.push(() => proxy.close());
  let source: ToolsSource;
  if (transport === "paths") source = new PathsTools(`ws://127.0.0.1:${proxy.port}`);
  else {
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { timeoutMs: 60_000, maxMessageBytes });
    cleanups.push(async () => connection.close());
    await connection.beginTools({ arguments: null }, { timeoutMs: 60_000 });
    source = connection.mcp;
  }
  const served = await serveToolsHttp(source, { host: "127.0.0.1", port: 0 });
  cleanups.push(() => served.close());
  return { url: served.url!, direct: `http://127.0.0.1:${app.port}/mcp`, app };
}

async function sdkAgent(url: string): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return client;
}

const JSON_RPC_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** A session made with a raw `initialize` (and its `notifications/initialized`): its id. */
async function rawSession(url: string): Promise<string> {
  const made = await fetch(url, {
    method: "POST",
    headers: JSON_RPC_HEADERS,
    body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  await made.text();
  expect(made.status).toBe(200);
  const session = made.headers.get("mcp-session-id")!;
  const initialized = await post(url, session, JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
  expect(initialized.status).toBe(202);
  return session;
}

/** A raw POST of `body` on `session`: status, content type and the body's text. */
async function post(url: string, session: string, body: string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<{ status: number; type: string | null; text: string }> {
  const response = await fetch(url, { method: "POST", headers: { ...JSON_RPC_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25", ...headers }, body, signal });
  return { status: response.status, type: response.headers.get("content-type"), text: await response.text() };
}

/** The JSON-RPC messages of an SSE body, in order. */
function sseMessages(text: string): { id?: unknown; method?: string; result?: unknown; error?: unknown; params?: unknown }[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => JSON.parse(line.slice("data: ".length)));
}

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe.each(TRANSPORTS)("--serve-tools' lean path on %s", (transport) => {
  it("answers a 4 MiB result exactly as the container's server gave it, as one plain JSON answer", { timeout: 60_000 }, async () => {
    const { url, direct } = await fixture(transport);
    const [relayed, own] = [await sdkAgent(url), await sdkAgent(direct)];
    const expected = await own.callTool({ name: "big", arguments: {} });
    const result = await relayed.callTool({ name: "big", arguments: {} });
    expect((result.content as { text: string }[])[0]!.text.length).toBeGreaterThan(3_000_000);
    expect(result).toEqual(expected);
    // Raw: a request with no progress token is answered with one JSON body carrying its id.
    const session = await rawSession(url);
    const raw = await post(url, session, JSON.stringify({ jsonrpc: "2.0", id: "big-1", method: "tools/call", params: { name: "big", arguments: {} } }));
    expect(raw.status).toBe(200);
    expect(raw.type).toBe("application/json");
    expect(JSON.parse(raw.text)).toEqual({ jsonrpc: "2.0", id: "big-1", result: expected });
  });

  it("refuses malformed JSON-RPC with -32700 / -32600 (HTTP 400) and bad params with -32602, and the session goes on", { timeout: 60_000 }, async () => {
    const { url } = await fixture(transport);
    const session = await rawSession(url);
    const refusal = async (body: string) => {
      const answer = await post(url, session, body);
      return { status: answer.status, ...(JSON.parse(answer.text) as { id: unknown; error: { code: number; message: string } }) };
    };
    expect(await refusal("{not json")).toMatchObject({ status: 400, id: null, error: { code: -32700 } });
    expect(await refusal('{"hello":1}')).toMatchObject({ status: 400, id: null, error: { code: -32600, message: expect.stringContaining('"jsonrpc"') } });
    expect(await refusal('{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"quick"}}')).toMatchObject({ status: 400, error: { code: -32600, message: expect.stringContaining('"jsonrpc" is not "2.0"') } });
    expect(await refusal('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"quick"}}')).toMatchObject({ status: 400, error: { code: -32600, message: expect.stringContaining('"id"') } });
    expect(await refusal('{"jsonrpc":"2.0","id":1,"method":7}')).toMatchObject({ status: 400, error: { code: -32600, message: expect.stringContaining('"method"') } });
    expect(await refusal('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}')).toMatchObject({ status: 400, error: { code: -32600, message: expect.stringContaining('"params"') } });
    expect(await refusal('{"jsonrpc":"2.0","id":1}')).toMatchObject({ status: 400, error: { code: -32600 } });
    expect(await refusal("7")).toMatchObject({ status: 400, error: { code: -32600 } });
    // A JSON-RPC request whose params the exchange cannot carry: the request's own error, with its id.
    expect(await refusal('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}')).toMatchObject({ status: 200, id: 5, error: { code: -32602, message: expect.stringContaining("params.name") } });
    expect(await refusal('{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{}}')).toMatchObject({ status: 200, id: 6, error: { code: -32602, message: expect.stringContaining("params.uri") } });
    expect(await refusal('{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":3}}')).toMatchObject({ status: 200, id: 7, error: { code: -32602, message: expect.stringContaining("params.cursor") } });
    // The SDK transport's refusals of the headers, worded as it words them.
    const call = JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "quick" } });
    expect(await post(url, session, call, { accept: "application/json" })).toMatchObject({ status: 406, text: expect.stringContaining("Not Acceptable") });
    expect(await post(url, session, call, { "content-type": "text/plain" })).toMatchObject({ status: 415, text: expect.stringContaining("Unsupported Media Type") });
    expect(await post(url, session, call, { "mcp-protocol-version": "1999-01-01" })).toMatchObject({ status: 400, text: expect.stringContaining("Unsupported protocol version: 1999-01-01") });
    // And the session still serves a call.
    const served = await post(url, session, call);
    expect(served.status).toBe(200);
    expect(JSON.parse(served.text)).toEqual({ jsonrpc: "2.0", id: 8, result: { content: [{ type: "text", text: "quick" }] } });
  });

  it("serves a batch as the SDK's transport does (every answer), and refuses one over its limit with -32600", { timeout: 60_000 }, async () => {
    const { url } = await fixture(transport);
    const session = await rawSession(url);
    const batch = await post(url, session, JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "quick" } }, { jsonrpc: "2.0", id: 2, method: "ping" }]));
    expect(batch.status).toBe(200);
    const answers = sseMessages(batch.text);
    expect(answers.map((answer) => answer.id).sort()).toEqual([1, 2]);
    expect(answers.find((answer) => answer.id === 1)).toMatchObject({ result: { content: [{ text: "quick" }] } });
    const many = Array.from({ length: 101 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "ping" }));
    const refused = await post(url, session, JSON.stringify(many));
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { code: -32600 } });
  });

  it("answers a request that asked for progress with an SSE stream: its progress (its own token), then its result", { timeout: 60_000 }, async () => {
    const { url } = await fixture(transport);
    const session = await rawSession(url);
    const answer = await post(url, session, JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "steps", arguments: {}, _meta: { progressToken: "mine" } } }));
    expect(answer.status).toBe(200);
    expect(answer.type).toBe("text/event-stream");
    const messages = sseMessages(answer.text);
    expect(messages.map((message) => message.method ?? `answer ${String(message.id)}`)).toEqual(["notifications/progress", "notifications/progress", "notifications/progress", "answer 3"]);
    expect(messages.slice(0, 3).map((message) => message.params)).toEqual([1, 2, 3].map((progress) => ({ progressToken: "mine", progress, total: 3, message: `step ${progress}` })));
    expect(messages[3]).toEqual({ jsonrpc: "2.0", id: 3, result: { content: [{ type: "text", text: "stepped" }] } });
    // Through the SDK's client, its onprogress sees each step before the result.
    const agent = await sdkAgent(url);
    const seen: number[] = [];
    const result = await agent.request({ method: "tools/call", params: { name: "steps", arguments: {} } }, CallToolResultSchema, { onprogress: (progress) => void seen.push(progress.progress) });
    expect(result.content).toEqual([{ type: "text", text: "stepped" }]);
    expect(seen).toEqual([1, 2, 3]);
  });

  it(`gives up a call the agent cancels mid-call${transport === "paths" ? " (the container's server sees it cancelled)" : ""}, ends that request's answer with none, and goes on`, { timeout: 60_000 }, async () => {
    const { url, app } = await fixture(transport);
    const agent = await sdkAgent(url);
    const abort = new AbortController();
    const call = agent.callTool({ name: "slow", arguments: {} }, undefined, { signal: abort.signal });
    await until(() => app.calls.includes("slow"), "the container's server to begin the call");
    abort.abort("the agent gave up");
    await expect(call).rejects.toThrow();
    if (transport === "paths") await until(() => app.calls.includes("slow:cancelled"), "the container's server to see the call cancelled");
    expect(await agent.callTool({ name: "quick", arguments: {} })).toEqual({ content: [{ type: "text", text: "quick" }] });
    // Raw: the cancelled request's HTTP answer ends, with no JSON-RPC message on it.
    const session = await rawSession(url);
    const pendingAnswer = post(url, session, JSON.stringify({ jsonrpc: "2.0", id: "slow-2", method: "tools/call", params: { name: "slow", arguments: {} } }));
    await until(() => app.calls.filter((what) => what === "slow").length === 2, "the second slow call to begin");
    const cancel = await post(url, session, JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "slow-2", reason: "enough" } }));
    expect(cancel.status).toBe(202);
    const ended = await pendingAnswer;
    expect(ended.status).toBe(200);
    expect(sseMessages(ended.text)).toEqual([]);
    if (transport === "paths") await until(() => app.calls.filter((what) => what === "slow:cancelled").length === 2, "the second call to be cancelled at the container's server");
    expect(JSON.parse((await post(url, session, JSON.stringify({ jsonrpc: "2.0", id: "after", method: "tools/call", params: { name: "quick" } }))).text)).toMatchObject({ id: "after", result: { content: [{ text: "quick" }] } });
  });

  it("gives up a session's relayed calls in flight when the session is deleted: their answers end", { timeout: 60_000 }, async () => {
    const { url, app } = await fixture(transport);
    const session = await rawSession(url);
    const abandoned = post(url, session, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "slow", arguments: {} } }));
    await until(() => app.calls.includes("slow"), "the container's server to begin the call");
    const deleted = await fetch(url, { method: "DELETE", headers: { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" } });
    expect(deleted.status).toBe(200);
    expect(sseMessages((await abandoned).text)).toEqual([]);
    if (transport === "paths") await until(() => app.calls.includes("slow:cancelled"), "the call to be cancelled at the container's server");
    expect((await post(url, session, JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }))).status).toBe(404);
  });
});

describe("--serve-tools' lean path on multiplexed, the proxy's message limit", () => {
  it("refuses a call over the proxy's message limit alone (-32600 naming the limit), unsent, and the connection serves the next", { timeout: 60_000 }, async () => {
    const limit = 64 * 1024;
    const { url } = await fixture("multiplexed", limit);
    const agent = await sdkAgent(url);
    const failure = await agent.callTool({ name: "quick", arguments: { pad: "x".repeat(2 * limit) } }).catch((problem: unknown) => problem as { code?: number; message?: string });
    expect(failure).toMatchObject({ code: -32600, message: expect.stringContaining(`larger than the proxy's message limit of ${limit} bytes`) });
    // The proxy would have ended the one connection on it: the next call is answered on it.
    expect(await agent.callTool({ name: "quick", arguments: {} })).toEqual({ content: [{ type: "text", text: "quick" }] });
  });
});
