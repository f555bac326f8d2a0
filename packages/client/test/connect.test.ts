// `diverge connect` as a consumer meets it: it holds the proxy's one multiplexed connection, serves
// the container's tools to any number of plain MCP SDK clients (Streamable HTTP) or one over stdio,
// passes results and errors through as the container's server gives them, exits 3 when the
// connection is lost and 0 on SIGTERM, and every other `diverge` command says what happened.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { request as httpRequest } from "node:http";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const run = promisify(execFile);
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

interface Fixture {
  app: ExampleContainer;
  proxy: RunningProxy;
}

async function fixture(options: { secretsGate?: boolean } = {}): Promise<Fixture> {
  let pgPort = 0;
  const app = await startExampleContainer({ pgPort: () => pgPort, database: { user: "postgres", database: "postgres" } });
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, log: () => {}, ...options });
  pgPort = proxy.multiplexed.pgPort;
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

interface Running {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
  waitFor(text: string | RegExp, ms?: number): Promise<string>;
}

function connect(args: string[], options: { env?: Record<string, string> } = {}): Running {
  const child = spawn("node", [cli, "connect", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  return {
    child,
    stderr: () => stderr,
    exited,
    async waitFor(text, ms = 60_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const match = typeof text === "string" ? (stderr.includes(text) ? text : undefined) : text.exec(stderr)?.[0];
        if (match !== undefined) return match;
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`never saw ${String(text)}; exit ${child.exitCode}; stderr:\n${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
  };
}

async function mcpClient(url: string): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return client;
}

/** What an exchange came to: its result, or its MCP error's code and message. */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return { result: await call() };
  } catch (problem) {
    const error = problem as { code?: unknown; message?: string; data?: unknown };
    return { error: { code: error.code, message: error.message, data: error.data } };
  }
}

/** Every relayed exchange comes to the same outcome through the bridge as directly against the container's server. */
async function sameAsDirect(agents: Client[], direct: Client): Promise<void> {
  const calls: [string, (client: Client) => Promise<unknown>][] = [
    ["tools/list", (client) => client.listTools()],
    ["tools/call greet", (client) => client.callTool({ name: "greet", arguments: { name: "Ada" } })],
    ["tools/call unknown", (client) => client.callTool({ name: "nope", arguments: {} })],
    ["tools/call greet with bad arguments", (client) => client.callTool({ name: "greet", arguments: { name: 7 } })],
    ["resources/list", (client) => client.listResources()],
    ["resources/read", (client) => client.readResource({ uri: "example://readme" })],
    ["resources/read unknown", (client) => client.readResource({ uri: "example://none" })],
  ];
  for (const [what, call] of calls) {
    const expected = await outcome(() => call(direct));
    const seen = await Promise.all(agents.map((agent) => outcome(() => call(agent))));
    for (const each of seen) expect(each, what).toEqual(expected);
  }
}

const begin = (proxy: RunningProxy) => ["--proxy", `ws://127.0.0.1:${proxy.port}`, "--arguments", '{"greeting":"Hey"}', "--secret-env", "API_KEY"];

describe("diverge connect --serve-tools", () => {
  it("serves the container's tools over --transport paths (/tool/*) as over the multiplexed one", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture({ secretsGate: false });
    const running = connect(["--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--serve-tools", "127.0.0.1:0"]);
    const url = (await running.waitFor(/http:\/\/127\.0\.0\.1:\d+\/mcp/)).trim();
    const agents = await Promise.all([mcpClient(url), mcpClient(url)]);
    await sameAsDirect(agents, await mcpClient(app.url.replace(/\/$/, "") + "/mcp"));
    expect(running.stderr()).toContain("tools/call: answered");
    // The container's database connection goes on /requests (kind 11) to the embedded PGlite.
    const rows = (await agents[0]!.callTool({ name: "query", arguments: { sql: "select 6 * 7 as answer" } })) as { content: { text: string }[]; isError?: boolean };
    expect(rows.isError).toBeFalsy();
    expect(JSON.parse(rows.content[0]!.text)).toEqual([{ answer: 42 }]);
    // Its line may come a moment after the answer (the pair reports once the path is set up).
    await running.waitFor(/\/postgres\/\d+/);
    // Nothing was begun: / is still free for a provider.
    expect(proxy.multiplexed.connection).toBeUndefined();
    running.child.kill("SIGTERM");
    expect(await running.exited).toBe(0);
  });

  it("serves the container's tools to several MCP sessions at once, as the container's server answers them", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture();
    const running = connect([...begin(proxy), "--serve-tools", "127.0.0.1:0"], { env: { API_KEY: "k" } });
    const url = (await running.waitFor(/http:\/\/127\.0\.0\.1:\d+\/mcp/)).trim();
    const agents = await Promise.all([mcpClient(url), mcpClient(url), mcpClient(url)]);
    const direct = await mcpClient(app.url.replace(/\/$/, "") + "/mcp");

    // Only what is relayed is advertised.
    // `logging`: the bridge forwards the container's log messages (MCP 2025-11-25 requires the capability).
    expect(agents[0]!.getServerCapabilities()).toEqual({ tools: { listChanged: true }, resources: { listChanged: true }, logging: {} });
    await sameAsDirect(agents, direct);
    // A method the bridge does not relay is MCP's method-not-found.
    const prompts = (await outcome(() => agents[1]!.listPrompts())) as { error: { code: number } };
    expect(prompts.error.code).toBe(-32601);
    // The container's database: the query tool's connection is announced on / and served by the embedded PGlite.
    const rows = (await agents[2]!.callTool({ name: "query", arguments: { sql: "select 41 + 1 as answer" } })) as { content: { text: string }[]; isError?: boolean };
    expect(rows.isError).toBeFalsy();
    expect(JSON.parse(rows.content[0]!.text)).toEqual([{ answer: 42 }]);
    expect(running.stderr()).toContain("tools/call: answered");

    // A second command against the same proxy says what happened and what to do, with its own status.
    const second = await run("node", [cli, "tools", "list", "--proxy", `ws://127.0.0.1:${proxy.port}`]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(second?.code).toBe(4);
    expect(second?.stderr.trim().split("\n")).toHaveLength(1);
    expect(second?.stderr).toContain("the proxy's one multiplexed connection");
    expect(second?.stderr).toContain("diverge connect");

    // The proxy goes away: the one connection is lost, the command says so and exits 3.
    await proxy.close();
    expect(await running.exited).toBe(3);
    expect(running.stderr()).toContain("multiplexed connection (ws://127.0.0.1:");
    expect(running.stderr()).toContain("was lost");
  });

  it("refuses a request whose Host or Origin is not its own, as the proxy's program port does", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const running = connect([...begin(proxy), "--serve-tools", "127.0.0.1:0"], { env: { API_KEY: "k" } });
    const url = new URL((await running.waitFor(/http:\/\/127\.0\.0\.1:\d+\/mcp/)).trim());
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const request = httpRequest({ host: "127.0.0.1", port: url.port, path: "/mcp", method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        });
        request.on("error", reject);
        request.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
      });
    expect(await status({ host: "evil.example:80" })).toBe(403);
    expect(await status({ host: `127.0.0.1:${url.port}`, origin: "http://evil.example" })).toBe(403);
    // A loopback Host and Origin pass the guard (and meet the session rule: no session, not an initialize).
    expect(await status({ host: `localhost:${url.port}`, origin: "http://localhost:3000" })).toBe(400);
    await mcpClient(url.href);
  });

  it("stops on SIGTERM with exit 0 and serves one session over stdio", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const transport = new StdioClientTransport({ command: "node", args: [cli, "connect", ...begin(proxy), "--serve-tools-stdio"], env: { ...(process.env as Record<string, string>), API_KEY: "k" }, stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(transport);
    const tools = await client.listTools();
    expect(tools.tools.map((tool) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    const greeting = await client.callTool({ name: "greet", arguments: { name: "Bo" } });
    expect(greeting.content).toEqual([{ type: "text", text: "Hey, Bo!" }]);
    const pid = transport.pid!;
    const child = { exited: new Promise<void>((resolve) => (transport.onclose = () => resolve())) };
    process.kill(pid, "SIGTERM");
    await child.exited;
    expect(stderr).toContain("stopping");
    await client.close();
  });
});

describe("diverge connect", () => {
  it("exits 5 with one sentence when the proxy is not there, and 2 on a wrong flag", { timeout: 120_000 }, async () => {
    const unreachable = await run("node", [cli, "connect", "--proxy", "ws://127.0.0.1:9", "--quiet"]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(unreachable?.code).toBe(5);
    expect(unreachable?.stderr).toContain("could not open ws://127.0.0.1:9/");
    const wrong = await run("node", [cli, "connect", "--transport", "carrier-pigeon"]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(wrong?.code).toBe(2);
    const help = await run("node", [cli, "connect", "--help"]);
    expect(help.stdout).toContain("Exit statuses:");
    expect(help.stdout).toContain("3  the proxy's one multiplexed connection");
  });

  it("--transport paths holds /requests, answers the proxy's MCP asks from --mcp, dials again when it ends, and stops on SIGINT", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture({ secretsGate: false });
    const running = connect(["--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--mcp", `${app.url.replace(/\/$/, "")}/mcp`]);
    await running.waitFor("connected to");
    const tools = await proxy.mcp.listTools();
    expect(JSON.stringify(tools)).toContain("greet");
    await running.waitFor("/mcp/list-tools/");
    // The proxy goes and comes back on the same port: /requests is dialled again.
    const port = proxy.port;
    await proxy.close();
    await running.waitFor("dialling again");
    const again = await startProxy({ port, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, log: () => {}, secretsGate: false });
    cleanups.push(() => again.close());
    await running.waitFor(/connected to[^\n]*\n[^]*connected to/);
    running.child.kill("SIGINT");
    expect(await running.exited).toBe(0);
  });
});

