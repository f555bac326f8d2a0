// `diverge connect` with every backend flag, on both transports, against a real proxy and a real
// PostgreSQL: the program's outward MCP exchanges reach --mcp / --mcp-stdio, its vault lands in
// --vault-database-url / --vault-dir, its commands run --command-exec, its database connections reach
// --database-url (else the embedded PGlite); --serve-tools-stdio serves on paths as on multiplexed;
// and a command after a refused begin says in one sentence that the one connection is used.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { connect as tcpConnect, createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type RunningProxy } from "@diverge/server";
import { startThrowawayPostgres, type ThrowawayPostgres } from "./multiplexed-postgres-server.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const stdioServer = fileURLToPath(new URL("./paths-stdio-server.mjs", import.meta.url));
const run = promisify(execFile);
type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

let database: ThrowawayPostgres;
const cleanups: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  database = await startThrowawayPostgres();
}, 120_000);
afterAll(async () => {
  await database?.stop();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function fixture(): Promise<{ app: ExampleContainer; proxy: RunningProxy }> {
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

function connect(proxy: RunningProxy, transport: Transport, flags: string[]): { child: ChildProcess; stderr: () => string; waitFor(text: string | RegExp): Promise<void> } {
  const begin = transport === "multiplexed" ? ["--arguments", '{"greeting":"Hey"}'] : [];
  const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, ...begin, ...flags], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
  });
  return {
    child,
    stderr: () => stderr,
    async waitFor(text) {
      const deadline = Date.now() + 90_000;
      while (!(typeof text === "string" ? stderr.includes(text) : text.test(stderr))) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`never saw ${String(text)}; exit ${child.exitCode}; stderr:\n${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
  };
}

/** The program inside the container: its MCP client on the proxy's /mcp. */
async function program(proxy: RunningProxy): Promise<Client> {
  const client = new Client({ name: "program", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
  cleanups.push(() => client.close());
  return client;
}

async function vault(proxy: RunningProxy, key: string, value?: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${proxy.programPort}/vault/${key}`, value === undefined ? {} : { method: "PUT", body: value });
  return { status: response.status, body: await response.text() };
}

async function command(proxy: RunningProxy, bytes: string): Promise<unknown[]> {
  const response = await fetch(`http://127.0.0.1:${proxy.programPort}/command`, { method: "POST", body: bytes });
  const lines = (await response.text()).trim().split("\n");
  return lines.map((line) => {
    const parsed = JSON.parse(line) as { item?: string; end?: string };
    return parsed.item !== undefined ? Buffer.from(parsed.item, "base64").toString("utf8") : parsed;
  });
}

/** A database driver of the program, on the proxy's database listener. */
async function query(proxy: RunningProxy, sql: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ host: "127.0.0.1", port: proxy.multiplexed.pgPort, user: "postgres", database: "postgres", connectionTimeoutMillis: 60_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.query(sql)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

function commandScript(): string {
  const dir = mkdtempSync(join(tmpdir(), "diverge-command-"));
  const script = join(dir, "run.sh");
  writeFileSync(script, "#!/bin/sh\ncat\necho\necho second\n");
  chmodSync(script, 0o755);
  return script;
}

describe("diverge connect with every backend flag", () => {
  for (const transport of TRANSPORTS) {
    it(`--mcp-stdio, --database-url, --vault-database-url, --command-exec — ${transport}`, { timeout: 120_000 }, async () => {
      const { proxy } = await fixture();
      const running = connect(proxy, transport, ["--mcp-stdio", `node ${stdioServer}`, "--database-url", database.url, "--vault-database-url", database.url, "--vault-namespace", `ns-${transport}`, "--command-exec", commandScript()]);
      await running.waitFor(transport === "multiplexed" ? "/ begun" : "connected to");
      // Outward MCP, to the stdio server: on the begin scope once begun, on /requests otherwise.
      const agent = await program(proxy);
      expect(await agent.callTool({ name: "reverse", arguments: { text: "abc" } })).toMatchObject({ content: [{ type: "text", text: "cba" }] });
      expect((await agent.listResources()).resources.map((resource) => resource.uri)).toEqual(["note://motd"]);
      await running.waitFor(transport === "multiplexed" ? /\/ channel \d+: mcpCallTool/ : /\/mcp\/call-tool\/\d+: answered/);
      // The vault, in the PostgreSQL of --vault-database-url.
      expect(await vault(proxy, "k", "v1")).toEqual({ status: 204, body: "" });
      expect(await vault(proxy, "k")).toEqual({ status: 200, body: "v1" });
      const direct = new pg.Client({ connectionString: database.url });
      await direct.connect();
      cleanups.push(() => direct.end());
      const stored = await direct.query("select convert_from(value, 'UTF8') as value from diverge_vault where namespace = $1 and key = 'k'", [`ns-${transport}`]);
      expect(stored.rows).toEqual([{ value: "v1" }]);
      // Commands run --command-exec (on /requests on both: the command has no begin-scope channel).
      expect(await command(proxy, "hello")).toEqual(["hello", "second", { end: "done" }]);
      // The program's database connections reach --database-url.
      expect(await query(proxy, "select inet_server_port() as port")).toEqual([{ port: database.port }]);
      running.child.kill("SIGINT");
      await new Promise((resolve) => running.child.once("exit", resolve));
      expect(running.child.exitCode).toBe(0);
    });

    it(`--mcp, --vault-dir, the embedded PGlite — ${transport}`, { timeout: 120_000 }, async () => {
      const { proxy } = await fixture();
      const upstream = await startExampleContainer();
      cleanups.push(() => upstream.close());
      const dir = mkdtempSync(join(tmpdir(), "diverge-vault-dir-"));
      const running = connect(proxy, transport, ["--mcp", `${upstream.url.replace(/\/$/, "")}/mcp`, "--vault-dir", dir]);
      await running.waitFor(transport === "multiplexed" ? "/ begun" : "connected to");
      expect(running.stderr()).toContain(`vault in ${dir}`);
      const agent = await program(proxy);
      expect(await agent.callTool({ name: "greet", arguments: { name: "Ada" } })).toMatchObject({ content: [{ type: "text", text: "Hello, Ada!" }] });
      expect(upstream.calls).toContain("tools/call greet");
      expect(await vault(proxy, "k", "in a directory")).toEqual({ status: 204, body: "" });
      expect(await vault(proxy, "k")).toEqual({ status: 200, body: "in a directory" });
      expect(readdirSync(dir).length).toBeGreaterThan(0);
      // No --command-exec: a command is not served.
      expect(await command(proxy, "x")).toEqual([{ end: "notServed" }]);
      expect(await query(proxy, "select 6 * 7 as answer")).toEqual([{ answer: 42 }]);
      await running.waitFor("database: embedded PGlite");
    });
  }

  it("--serve-tools-stdio on --transport paths: one MCP session over stdio through /tool/*, logs on stderr only", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const transport = new StdioClientTransport({ command: "node", args: [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--serve-tools-stdio"], stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(transport);
    cleanups.push(() => client.close());
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    expect(await client.callTool({ name: "greet", arguments: { name: "Bo" } })).toMatchObject({ content: [{ type: "text", text: "Hello, Bo!" }] });
    expect(stderr).toContain("serving the container's tools on stdin/stdout");
    // Nothing was begun: / is still free.
    expect(proxy.multiplexed.connection).toBeUndefined();
  });
});

/** A TCP front to the proxy that can cut every connection whose HTTP request names `path`, leaving the others. */
async function cuttableFront(target: number): Promise<{ port: number; cut(path: string): number }> {
  const pairs: { path: string; client: Socket; upstream: Socket }[] = [];
  const server = createTcpServer((client) => {
    client.on("error", () => {});
    const upstream = tcpConnect({ host: "127.0.0.1", port: target });
    upstream.on("error", () => client.destroy());
    client.once("data", (first: Buffer) => {
      const path = /^GET (\S+) /.exec(first.toString("latin1"))?.[1] ?? "";
      pairs.push({ path, client, upstream });
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(async () => {
    for (const pair of pairs) pair.client.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    port: (server.address() as AddressInfo).port,
    cut(path) {
      const cut = pairs.filter((pair) => pair.path === path && !pair.client.destroyed);
      for (const pair of cut) pair.client.destroy();
      return cut.length;
    },
  };
}

describe("diverge connect --transport multiplexed: /requests beside /", () => {
  it("is dialled again when it ends, while the one connection on / goes on", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const front = await cuttableFront(proxy.port);
    const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${front.port}`, "--arguments", '{"greeting":"Hey"}', "--command-exec", commandScript()], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    });
    const waitFor = async (pattern: RegExp) => {
      const deadline = Date.now() + 90_000;
      while (!pattern.test(stderr)) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`never saw ${String(pattern)}; exit ${child.exitCode}; stderr:\n${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    };
    await waitFor(/\/ begun/);
    await waitFor(/connected to [^\n]*\/requests/);
    expect(front.cut("/requests")).toBe(1);
    await waitFor(/\/requests ended \(abruptly\); dialling again/);
    await waitFor(/connected to [^\n]*\/requests[^]*connected to [^\n]*\/requests/);
    // Commands ride the new /requests; the one connection on / is still held (the proxy's tools answer).
    expect(await command(proxy, "again")).toEqual(["again", "second", { end: "done" }]);
    expect(proxy.multiplexed.connection).toBeDefined();
    expect(child.exitCode).toBeNull();
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});

describe("a command after the proxy's one connection was used", () => {
  it("even by a connect whose begin was refused: one sentence naming what to do, exit 4; the refusal itself exits 6", { timeout: 120_000 }, async () => {
    const { proxy } = await fixture();
    const failure = (args: string[]) =>
      run("node", [cli, ...args]).then(
        () => ({ code: 0, stderr: "" }),
        (error: { code: number; stderr: string }) => error,
      );
    const refused = await failure(["connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--arguments", '{"nope":true}', "--quiet"]);
    expect(refused.code).toBe(6);
    expect(refused.stderr.trim().split("\n")).toHaveLength(1);
    for (const args of [["tools", "list"], ["connect"], ["tools", "call", "greet", '{"name":"x"}'], ["tools", "info"]]) {
      const second = await failure([...args, "--proxy", `ws://127.0.0.1:${proxy.port}`]);
      expect(second.code, args.join(" ")).toBe(4);
      const lines = second.stderr.trim().split("\n");
      expect(lines, args.join(" ")).toHaveLength(1);
      expect(lines[0]).toContain("the proxy's one multiplexed connection");
      expect(lines[0]).toContain("diverge connect");
      expect(lines[0]).toMatch(/restart the proxy/);
    }
    // The filesystem commands ride the paths transport, which the used / does not refuse; a file that
    // is not there is the exchange's failure (7), said in one sentence, not an unexpected one (1).
    const missing = await failure(["fs", "read", "/no/such/file", "--proxy", `ws://127.0.0.1:${proxy.port}`]);
    expect(missing.code).toBe(7);
    expect(missing.stderr.trim().split("\n")).toHaveLength(1);
  });
});
