// Issue 13 on every relay the project has, table-driven: the same checks run through each.
//
// Relays an MCP SDK client talks to (an agent or a program), each in front of the same far MCP server
// (the SDK's, ./fidelity-server.ts):
//   - outward over /requests: program → proxy's /mcp → /requests → relayToMcp → far server
//   - outward on the begin scope: program → proxy's /mcp → tags 7-11 → openContainer's handlers
//     (mcpProviderHandlers over relayToMcp) → far server
//   - --serve-tools over the begin scope: agent → serveToolsHttp → tags 3-7 → proxy → far server
//     as the container's MCP server
//   - --serve-tools over /tool/*: agent → serveToolsHttp → PathsTools → proxy → far server
//   - --serve-tools-stdio: agent → `diverge connect --serve-tools-stdio` (the real CLI) → begin scope → proxy → far server
// Relays the provider's own API talks to (inward):
//   - the begin scope: openContainer's `mcp` → proxy → far server
//   - /tool/*: PathsTools → proxy → far server
// Checked on each: every exchange answers as the far server answers a direct client (results,
// cursors, isError, MCP errors with data, _meta, every content type, the 2020-12 schema untouched);
// methods not carried are -32601 and not advertised; progress reaches exactly the request that asked,
// with its own token, though two sessions (or providers) use the same token at once; list changes, log
// messages and resource updates reach every session.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, type ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { startProxy, type RunningProxy } from "@diverge/server";
import { perRequestSignalFetch } from "@diverge/multiplexer";
import { connectProxy, mcpProviderHandlers, openContainer, PathsTools, relayToMcp, serveToolsHttp, type ToolsSource } from "../src/index.js";
import { EVERYTHING, EXCHANGES, outcome, SCHEMA_2020_12, startFarServer, viaSdk, type Exchanges, type FarServer } from "./fidelity-server.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, ms = 60_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await delay(10);
  }
}

type Agent = Client & { errors: Error[] };

function agent(name: string): Agent {
  const client = new Client({ name, version: "1.0.0" }) as Agent;
  client.errors = [];
  client.onerror = (error) => client.errors.push(error);
  cleanups.push(() => client.close());
  return client;
}

async function httpAgent(url: string, name: string): Promise<Agent> {
  const client = agent(name);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: perRequestSignalFetch() }));
  return client;
}

async function far(): Promise<FarServer> {
  const server = await startFarServer();
  cleanups.push(() => server.stop());
  return server;
}

async function proxyFor(server?: FarServer): Promise<RunningProxy> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, ...(server ? { appPort: server.port } : {}), secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return proxy;
}

/** The container begun on the proxy's one multiplexed connection. */
async function begun(proxy: RunningProxy, handlers?: Parameters<typeof openContainer>[1]) {
  const container = await openContainer(`ws://127.0.0.1:${proxy.port}/`, handlers);
  cleanups.push(async () => container.close());
  await container.beginTools({ arguments: null });
  return container;
}

async function serving(source: ToolsSource): Promise<string> {
  const served = await serveToolsHttp(source, { host: "127.0.0.1", port: 0 });
  cleanups.push(() => served.close());
  return served.url!;
}

/** A relay an MCP SDK client talks to: started in front of the far server, it makes connected clients. */
interface AgentRelay {
  readonly name: string;
  /** Sessions it holds at once (stdio: one). */
  readonly sessions: number;
  start(server: FarServer): Promise<(name: string) => Promise<Agent>>;
}

const AGENT_RELAYS: AgentRelay[] = [
  {
    name: "outward over /requests (program → proxy → /requests → relayToMcp)",
    sessions: 3,
    async start(server) {
      const proxy = await proxyFor();
      const relay = relayToMcp({ url: server.url });
      cleanups.push(() => relay.close());
      const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay, { minBackoffMs: 10 });
      cleanups.push(() => connection.close());
      await connection.whenConnected();
      return (name) => httpAgent(`http://127.0.0.1:${proxy.programPort}/mcp`, name);
    },
  },
  {
    name: "outward on the begin scope (program → proxy → tags 7-11 → openContainer's handlers → relayToMcp)",
    sessions: 3,
    async start(server) {
      const proxy = await proxyFor(server);
      const relay = relayToMcp({ url: server.url });
      cleanups.push(() => relay.close());
      await begun(proxy, { handlers: mcpProviderHandlers(relay) });
      return (name) => httpAgent(`http://127.0.0.1:${proxy.programPort}/mcp`, name);
    },
  },
  {
    name: "--serve-tools over the begin scope (agent → serveToolsHttp → tags 3-7 → proxy)",
    sessions: 3,
    async start(server) {
      const container = await begun(await proxyFor(server));
      const url = await serving(container.mcp);
      return (name) => httpAgent(url, name);
    },
  },
  {
    name: "--serve-tools over /tool/* (agent → serveToolsHttp → PathsTools → proxy)",
    sessions: 3,
    async start(server) {
      const proxy = await proxyFor(server);
      const url = await serving(new PathsTools(`ws://127.0.0.1:${proxy.port}`));
      return (name) => httpAgent(url, name);
    },
  },
  {
    name: "diverge connect --serve-tools-stdio (agent → the CLI on stdio → begin scope → proxy)",
    sessions: 1,
    async start(server) {
      const proxy = await proxyFor(server);
      return async (name) => {
        const client = agent(name);
        const transport = new StdioClientTransport({ command: "node", args: [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--serve-tools-stdio", "--quiet"], stderr: "pipe" });
        await client.connect(transport);
        return client;
      };
    },
  },
];

describe.each(AGENT_RELAYS)("$name: a faithful MCP server", (relay) => {
  it("answers every exchange exactly as the far server answers a direct client", { timeout: 120_000 }, async () => {
    const server = await far();
    const open = await relay.start(server);
    const direct = viaSdk(await httpAgent(server.url, "direct"));
    const relayed = viaSdk(await open("relayed"));
    for (const [what, exchange] of EXCHANGES) expect(await outcome(exchange(relayed)), what).toEqual(await outcome(exchange(direct)));
    // Spot checks that the comparison compared something.
    expect(((await relayed.listTools({ cursor: "tools-2" })) as { tools: { inputSchema: unknown }[] }).tools[0]!.inputSchema).toEqual(SCHEMA_2020_12);
    expect((await relayed.callTool({ name: "everything", arguments: {} })) as object).toEqual(EVERYTHING);
  });

  it("answers methods the wire does not carry with -32601 and does not advertise them", { timeout: 120_000 }, async () => {
    const open = await relay.start(await far());
    const client = await open("agent");
    // The --serve-tools bridge forwards the container's log messages, so it declares `logging` (MCP
    // 2025-11-25) and keeps each session's logging/setLevel; the program's /mcp relays none.
    const bridge = relay.name.includes("serve-tools");
    expect(client.getServerCapabilities()).toEqual(bridge ? { tools: { listChanged: true }, resources: { listChanged: true }, logging: {} } : { tools: { listChanged: true }, resources: { listChanged: true } });
    if (bridge) await client.setLoggingLevel("info");
    for (const method of ["prompts/list", "prompts/get", "completion/complete", ...(bridge ? [] : ["logging/setLevel"]), "resources/templates/list", "resources/subscribe", "sampling/createMessage"]) {
      const failure = await outcome(client.request({ method, params: method === "logging/setLevel" ? { level: "info" } : {} } as never, CallToolResultSchema));
      expect(failure, method).toMatchObject({ code: ErrorCode.MethodNotFound });
    }
    await client.ping();
  });

  it("brings progress to exactly the request that asked, with its own token, though sessions use the same token at once", { timeout: 120_000 }, async () => {
    const open = await relay.start(await far());
    const clients = relay.sessions > 1 ? [await open("a"), await open("b")] : [await open("a")];
    const [a, b] = [clients[0]!, clients[1] ?? clients[0]!];
    const seen: Record<string, string[]> = { a1: [], a2: [], b1: [] };
    const call = (client: Client, key: string, tag: string) =>
      client.request({ method: "tools/call", params: { name: "progress", arguments: { steps: 3, tag, delayMs: 20 } } }, CallToolResultSchema, {
        onprogress: (progress) => seen[key]!.push(`${progress.message} ${progress.progress}/${progress.total}`),
      });
    // The SDK uses a request's id as its token: both sessions' first calls carry the same token.
    const results = await Promise.all([call(a, "a1", "A1"), call(b, "b1", "B1"), call(a, "a2", "A2")]);
    expect(results.map((result) => (result.content[0] as { text: string }).text)).toEqual(["A1 done", "B1 done", "A2 done"]);
    const expected = { a1: ["A1 1 1/3", "A1 2 2/3", "A1 3 3/3"], a2: ["A2 1 1/3", "A2 2 2/3", "A2 3 3/3"], b1: ["B1 1 1/3", "B1 2 2/3", "B1 3 3/3"] };
    if (relay.sessions === 1) {
      // On stdio the MCP SDK's client handles an answer at once and a notification a microtask later,
      // so progress that reaches its pipe in the same read as the answer (the 20 ms between them
      // lost to a busy machine) is dropped by the client itself, directly too. What did arrive is
      // this request's own, in order: a prefix of what was sent.
      await delay(100);
      for (const [key, lines] of Object.entries(seen)) expect(lines, key).toEqual(expected[key as keyof typeof expected].slice(0, lines.length));
      return;
    }
    await until(() => Object.values(seen).every((lines) => lines.length >= 3), 60_000, "every progress");
    await delay(100);
    expect(seen).toEqual(expected);
    // Nothing arrived with a token the SDK did not make (which it reports as an error).
    expect(clients.flatMap((client) => client.errors.map(String)).filter((text) => /progress|token/i.test(text))).toEqual([]);
  });

  // Not on stdio: the MCP SDK's client handles a response at once and a notification a microtask
  // later, so progress read in the same chunk as its answer is "unknown token" to it, directly too.
  it.skipIf(relay.sessions === 1)("delivers progress sent right before the answer, before the answer", { timeout: 120_000 }, async () => {
    const open = await relay.start(await far());
    const client = await open("agent");
    // The relays open their notification stream at the first exchange: let it open.
    await client.listTools();
    await delay(300);
    const seen = Array.from({ length: 20 }, () => [] as number[]);
    await Promise.all(
      seen.map((lines, k) =>
        client.request({ method: "tools/call", params: { name: "progress", arguments: { steps: 3, tag: `R${k}`, delayMs: 0 } } }, CallToolResultSchema, {
          onprogress: (progress) => void lines.push(progress.progress),
        }),
      ),
    );
    // Counted when each answer arrived: what came after its answer was too late.
    expect(seen).toEqual(seen.map(() => [1, 2, 3]));
    expect(client.errors.map(String).filter((text) => /progress|token/i.test(text))).toEqual([]);
  });

  it("sends list changes, log messages and resource updates to every session, and another's progress to none", { timeout: 120_000 }, async () => {
    const open = await relay.start(await far());
    const clients: Agent[] = [];
    for (let i = 0; i < relay.sessions; i++) clients.push(await open(`s${i}`));
    const got: string[][] = clients.map(() => []);
    clients.forEach((client, index) => {
      client.fallbackNotificationHandler = async (notification) => void got[index]!.push(notification.method);
    });
    // The relays open their notification stream at the first exchange: let it open.
    await clients[0]!.listTools();
    await delay(300);
    const asker = clients[clients.length - 1]!;
    await asker.request({ method: "tools/call", params: { name: "progress", arguments: { steps: 2, tag: "p" }, _meta: { progressToken: "tok" } } }, CallToolResultSchema);
    await clients[0]!.callTool({ name: "notify", arguments: {} });
    await until(() => got.every((methods) => methods.length >= 3), 60_000, "notifications in every session");
    await delay(100);
    for (const methods of got) expect(methods.sort()).toEqual(["notifications/message", "notifications/resources/updated", "notifications/tools/list_changed"]);
    // The SDK's client reports progress whose token it did not make as an error: the asker got its
    // two (token "tok", made by hand, so unknown to its SDK), every other session none.
    const unknown = clients.map((client) => client.errors.map(String).filter((text) => /unknown token/.test(text)));
    expect(unknown[clients.length - 1]!.length).toBe(2);
    expect(unknown[clients.length - 1]![0]).toContain('"progressToken":"tok"');
    expect(unknown.slice(0, -1).flat()).toEqual([]);
  });
});

/** A relay the provider's own API talks to (inward), with its notification stream. */
interface ProviderRelay {
  readonly name: string;
  start(proxy: RunningProxy): Promise<Exchanges & { notifications(): AsyncIterable<ServerNotification> & { close(): void } }>;
}

const PROVIDER_RELAYS: ProviderRelay[] = [
  { name: "inward on the begin scope (openContainer's mcp → proxy)", start: async (proxy) => (await begun(proxy)).mcp as never },
  { name: "inward over /tool/* (PathsTools → proxy)", start: async (proxy) => new PathsTools(`ws://127.0.0.1:${proxy.port}`) as never },
];

/** Reads a relay's notification stream into a list until the test ends. */
function reader(via: { notifications(): AsyncIterable<ServerNotification> & { close(): void } }): ServerNotification[] {
  const stream = via.notifications();
  const got: ServerNotification[] = [];
  const reading = (async () => {
    for await (const notification of stream) got.push(notification);
  })().catch(() => {});
  cleanups.push(async () => {
    stream.close();
    await reading;
  });
  return got;
}

const progressOf = (got: ServerNotification[], token: string | number) =>
  got.filter((n) => n.method === "notifications/progress" && (n.params as { progressToken: unknown }).progressToken === token).map((n) => (n.params as { message: string }).message);

describe.each(PROVIDER_RELAYS)("$name: a faithful MCP server", (relay) => {
  it("answers every exchange exactly as the far server answers a direct client", { timeout: 120_000 }, async () => {
    const server = await far();
    const via = await relay.start(await proxyFor(server));
    const direct = viaSdk(await httpAgent(server.url, "direct"));
    for (const [what, exchange] of EXCHANGES) expect(await outcome(exchange(via)), what).toEqual(await outcome(exchange(direct)));
    expect(((await via.listTools({ cursor: "tools-2" })) as { tools: { inputSchema: unknown }[] }).tools[0]!.inputSchema).toEqual(SCHEMA_2020_12);
    expect(await via.callTool({ name: "everything", arguments: {} })).toEqual(EVERYTHING);
  });

  it("brings each request's progress back with the provider's own token", { timeout: 120_000 }, async () => {
    const via = await relay.start(await proxyFor(await far()));
    const got = reader(via);
    await via.listTools();
    await delay(200);
    await Promise.all([
      via.callTool({ name: "progress", arguments: { steps: 2, tag: "X", delayMs: 20 }, _meta: { progressToken: "x" } }),
      via.callTool({ name: "progress", arguments: { steps: 3, tag: "Y", delayMs: 20 }, _meta: { progressToken: 7 } }),
    ]);
    await until(() => got.length >= 5, 60_000, "five progress notifications");
    expect([progressOf(got, "x"), progressOf(got, 7)]).toEqual([["X 1", "X 2"], ["Y 1", "Y 2", "Y 3"]]);
  });
});

describe("inward: the begin scope and /tool/* on one proxy (one MCP session with the container's server)", () => {
  it("brings progress only to the provider whose request it is, though both use the same token at once", { timeout: 120_000 }, async () => {
    const proxy = await proxyFor(await far());
    const [scope, paths] = [await PROVIDER_RELAYS[0]!.start(proxy), await PROVIDER_RELAYS[1]!.start(proxy)];
    const [onScope, onPaths] = [reader(scope), reader(paths)];
    await Promise.all([scope.listTools(), paths.listTools()]);
    await delay(200);
    await Promise.all([
      scope.callTool({ name: "progress", arguments: { steps: 2, tag: "S", delayMs: 20 }, _meta: { progressToken: 1 } }),
      paths.callTool({ name: "progress", arguments: { steps: 3, tag: "P", delayMs: 20 }, _meta: { progressToken: 1 } }),
    ]);
    await until(() => onScope.length >= 2 && onPaths.length >= 3, 60_000, "both providers' progress");
    await delay(100);
    expect([progressOf(onScope, 1), progressOf(onPaths, 1)]).toEqual([["S 1", "S 2"], ["P 1", "P 2", "P 3"]]);
  });

  it("sends list changes, log messages and resource updates to every subscription of both", { timeout: 120_000 }, async () => {
    const proxy = await proxyFor(await far());
    const [scope, paths] = [await PROVIDER_RELAYS[0]!.start(proxy), await PROVIDER_RELAYS[1]!.start(proxy)];
    const streams = [reader(scope), reader(scope), reader(paths), reader(paths)];
    await scope.listTools();
    await delay(300);
    await paths.callTool({ name: "notify", arguments: {} });
    await until(() => streams.every((got) => got.length >= 3), 60_000, "notifications on every stream");
    for (const got of streams) expect(got.map((n) => n.method).sort()).toEqual(["notifications/message", "notifications/resources/updated", "notifications/tools/list_changed"]);
  });
});

describe("--serve-tools' HTTP endpoint: Host and Origin (DNS rebinding)", () => {
  /** A raw request to `url` with the given Host and Origin: its status, and whether anything reached the far server. */
  async function raw(url: URL, headers: Record<string, string>, body: object): Promise<number> {
    const { request } = await import("node:http");
    return new Promise((resolve, reject) => {
      const sent = request(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } }, (response) => {
        response.resume();
        resolve(response.statusCode!);
      });
      sent.on("error", reject);
      sent.end(JSON.stringify(body));
    });
  }
  const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "evil", version: "1" } } };

  it("refuses a hostile Host or Origin with 403 before anything is relayed; --allow-host and --allow-origin widen them", { timeout: 120_000 }, async () => {
    const server = await far();
    const proxy = await proxyFor(server);
    const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--serve-tools", "127.0.0.1:0", "--allow-host", "tools.example", "--allow-origin", "https://app.example"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    });
    await until(() => /serving the container's tools at (\S+)/.test(stderr), 20_000, "the --serve-tools line");
    const url = new URL(/serving the container's tools at (\S+)/.exec(stderr)![1]!);
    const loopback = `127.0.0.1:${url.port}`;
    // The CLI's begin made the proxy's one session with the far server; count what reaches it from now on.
    await delay(200);
    const [sessions, requests] = [server.sessionCount(), server.requestCount()];
    const toolsCall = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "everything", arguments: {} } };
    expect(await raw(url, { host: "evil.example" }, initialize)).toBe(403);
    expect(await raw(url, { host: loopback, origin: "http://evil.example" }, initialize)).toBe(403);
    expect(await raw(url, { host: "tools.example.evil", origin: "https://app.example" }, initialize)).toBe(403);
    expect(await raw(url, { host: loopback, origin: "https://app.example:8443" }, initialize)).toBe(403);
    expect(await raw(url, { host: "evil.example", "mcp-session-id": "x" }, toolsCall)).toBe(403);
    // Nothing of those reached the container's MCP server.
    await delay(200);
    expect([server.sessionCount(), server.requestCount()]).toEqual([sessions, requests]);
    // Widened: the allowed host and origin pass, and so do loopback ones.
    expect(await raw(url, { host: `tools.example:${url.port}` }, initialize)).toBe(200);
    expect(await raw(url, { host: loopback, origin: "https://app.example" }, initialize)).toBe(200);
    expect(await raw(url, { host: `localhost:${url.port}`, origin: "http://localhost:3000" }, initialize)).toBe(200);
    // And a session made through the allowed host reaches the container.
    const allowed = agent("allowed");
    await allowed.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { origin: "https://app.example" } } }));
    expect(await allowed.callTool({ name: "everything", arguments: {} })).toEqual(EVERYTHING);
    expect(server.requestCount()).toBeGreaterThan(requests);
  });

  it("refuses --allow-host without --serve-tools (a usage error)", async () => {
    const child = spawn("node", [cli, "connect", "--proxy", "ws://127.0.0.1:9", "--allow-host", "x.example"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("--allow-host and --allow-origin widen --serve-tools");
  });
});
