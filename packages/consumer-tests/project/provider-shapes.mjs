// A consumer's provider code against the installed tarballs (issue 26 §2-§3): a real proxy
// (@diverge/server's startProxy) in front of the example program (@diverge/example-container), and
// the provider's calls a README shows. `node provider-shapes.mjs <scenario>` prints one JSON object.
//   shapes     openContainer(url, { handlers: relayToMcp(…) }) and connectProxy(url, relayToMcp(…))
//              both answer the program's outward MCP; a not-served ask names its exchange
//   database   openContainer's `database:` as { host, port }, { path } and a URL (PG_PORT, PG_SOCKET_DIR)
//   tree       LiveTree.get() takes the text paths() gives
//   stdio      `diverge connect` and `diverge answer` (the installed binary) both take a stdio MCP
//              server as `-- <command> [args...]`, its argv as given
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LiveTree, connectProxy, foldTree, openContainer, relayToMcp } from "@diverge/client";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

const cleanups = [];
const later = (cleanup) => cleanups.push(cleanup);

async function program(proxy) {
  const client = new Client({ name: "program", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.programPort}/mcp`)));
  later(() => client.close());
  return client;
}

const failure = (error) => ({ error: String(error?.message ?? error) });

async function proxyFor(options = {}) {
  const app = await startExampleContainer(options.app);
  later(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: options.root ?? exampleRoot, secretsGate: false, log: () => {} });
  later(() => proxy.close());
  return { app, proxy, url: `ws://127.0.0.1:${proxy.port}` };
}

/** A second example container whose MCP server stands for the provider's own. */
async function providerMcp() {
  const providers = await startExampleContainer();
  later(() => providers.close());
  const relay = relayToMcp({ url: `${providers.url}/mcp` });
  later(() => relay.close());
  return relay;
}

const scenarios = {
  async shapes() {
    const out = {};
    {
      // The relay's shape given to openContainer: the begin scope carries the program's MCP.
      const { proxy, url } = await proxyFor();
      const container = await openContainer(url, { handlers: await providerMcp() });
      later(() => container.close());
      await container.beginTools({ arguments: { greeting: "Hi" } });
      const agent = await program(proxy);
      out.openContainer = await agent.callTool({ name: "greet", arguments: { name: "Shape" } }).then((r) => r.content, failure);
    }
    {
      // The same relay given to connectProxy: /requests carries it.
      const { proxy, url } = await proxyFor();
      const connection = connectProxy(url, await providerMcp());
      later(() => connection.close());
      const agent = await program(proxy);
      out.connectProxy = await agent.callTool({ name: "greet", arguments: { name: "Paths" } }).then((r) => r.content, failure);
    }
    {
      // No handler for tools/list: the program's MCP error names the exchange.
      const { proxy, url } = await proxyFor();
      const container = await openContainer(url, { handlers: {} });
      later(() => container.close());
      await container.beginTools({ arguments: { greeting: "Hi" } });
      const agent = await program(proxy);
      out.notServed = await agent.listTools().then(() => ({ error: "served" }), failure);
    }
    return out;
  },

  async database() {
    const port = Number(process.env.PG_PORT);
    const warnings = [];
    process.on("warning", (warning) => warnings.push({ code: warning.code, message: warning.message }));
    const forms = {
      hostPort: { host: "127.0.0.1", port },
      path: { path: join(process.env.PG_SOCKET_DIR, `.s.PGSQL.${port}`) },
      url: `postgres://someone:hunter2@127.0.0.1:${port}/elsewhere?sslmode=require`,
    };
    const out = {};
    for (const [form, database] of Object.entries(forms)) {
      // The program's driver speaks for itself through the pipe: its user and database go through.
      let pgPort = 0;
      const { proxy, app, url } = await proxyFor({ app: { pgPort: () => pgPort, database: { user: "postgres", database: "postgres" } } });
      pgPort = proxy.multiplexed.pgPort;
      const container = await openContainer(url, { database });
      later(() => container.close());
      await container.beginTools({ arguments: { greeting: "Hi" } });
      const direct = new Client({ name: "check", version: "1.0.0" });
      await direct.connect(new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`)));
      later(() => direct.close());
      const result = await direct.callTool({ name: "query", arguments: { sql: "SELECT current_user AS who, current_database() AS db, 42 AS n" } });
      out[form] = result.isError ? { error: result.content[0].text } : JSON.parse(result.content[0].text)[0];
    }
    await new Promise((resolve) => setImmediate(resolve));
    out.warnings = warnings.filter((w) => w.code?.startsWith("DIVERGE"));
    return out;
  },

  async tree() {
    const root = mkdtempSync(join(tmpdir(), "diverge-consumer-tree-"));
    later(() => rmSync(root, { recursive: true, force: true }));
    mkdirSync(join(root, "src"));
    writeFileSync(join(root, "src", "main.rs"), "fn main() {}\n");
    writeFileSync(join(root, "DIVERGE.md"), "# tree\n");
    const { url } = await proxyFor({ root });
    const container = await openContainer(url);
    later(() => container.close());
    await container.beginTools({ arguments: { greeting: "Hi" } });
    const tree = new LiveTree();
    for await (const live of foldTree(container.tree(), tree)) if (live.paths().length > 0) break;
    const paths = tree.paths();
    return { paths, found: paths.map((path) => tree.get(path)?.name ?? null), components: tree.get(["src", "main.rs"])?.name ?? null };
  },
};

/** Runs the installed `diverge` with `args`, until the scenario ends. */
function diverge(args) {
  const child = spawn(join("node_modules", ".bin", "diverge"), args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  later(() => child.kill("SIGTERM"));
  return { stderr: () => stderr };
}

scenarios.stdio = async () => {
  const out = {};
  // One argv entry with a space in it: split on spaces, it would be two.
  const server = ["--", process.execPath, "stdio-mcp.mjs", "Good day"];
  for (const command of ["connect", "answer"]) {
    const { proxy, url } = await proxyFor();
    const run = diverge(command === "connect" ? ["connect", "--proxy", url, "--arguments", '{"greeting":"Hi"}', ...server] : ["answer", "--proxy", url, ...server]);
    const agent = await program(proxy);
    out[command] = await agent.callTool({ name: "greet", arguments: {} }).then((r) => r.content, (error) => ({ ...failure(error), stderr: run.stderr() }));
  }
  return out;
};

scenarios.connectDatabase = async () => {
  // `diverge connect --database-url`: the program's driver reaches the database through it.
  let pgPort = 0;
  const { proxy, app, url } = await proxyFor({ app: { pgPort: () => pgPort, database: { user: "postgres", database: "postgres" } } });
  pgPort = proxy.multiplexed.pgPort;
  const run = diverge(["connect", "--proxy", url, "--arguments", '{"greeting":"Hi"}', "--database-url", process.env.DATABASE_URL]);
  const direct = new Client({ name: "check", version: "1.0.0" });
  await direct.connect(new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`)));
  later(() => direct.close());
  // The begin comes when `diverge connect` has connected: until then the proxy holds the connection.
  const result = await direct.callTool({ name: "query", arguments: { sql: "SELECT current_user AS who, current_database() AS db, 42 AS n" } });
  return { row: result.isError ? { error: result.content[0].text } : JSON.parse(result.content[0].text)[0], stderr: run.stderr().split("\n").filter(Boolean) };
};

const scenario = scenarios[process.argv[2]];
if (!scenario) throw new Error(`no scenario ${process.argv[2]}: ${Object.keys(scenarios).join(", ")}`);
try {
  process.stdout.write(`${JSON.stringify(await scenario())}\n`);
} finally {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
}
process.exit(0);
