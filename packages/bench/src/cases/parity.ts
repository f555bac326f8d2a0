// Case 8: the two transports side by side (issue 16 §7), over loopback, every call `tools/call greet`.
//   inward, through `diverge connect --serve-tools` (a separate process, as an agent would use it):
//     (d) multiplexed: agent → serve-tools → begin-scope channels 3-7 → proxy → container's /mcp
//     (e) paths:       agent → serve-tools → /tool/call-tool → proxy → container's /mcp
//   outward, the program's call answered by a provider relaying to the container's MCP server:
//     (f) begin scope: program → proxy's /mcp → proxy-opened channel 9 → provider → MCP server
//     (g) /requests:   program → proxy's /mcp → /requests ask → answer path → provider → MCP server
//   (c) baseline: the MCP SDK client → the container's /mcp directly.
// Postgres, one-row queries (`select $1::int`) on one connection, against an embedded PGlite behind a
// PostgreSQL socket in this process (one connection at a time, so the three run one after another):
//     (p) direct, (q) through the begin-scope pair (tag 0), (r) through /requests kind 11.
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { connectProxy, mcpProviderHandlers, openContainer, perRequestSignalFetch, pipePostgres, postgresOverPaths, relayToMcp } from "@diverge/client";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import pg from "pg";
import { load, profileArgs, socatChain, startChild, treeCpuMicros, type LoadResult } from "../processes.js";
import type { SuiteReport } from "../run.js";

const cli = join(dirname(createRequire(import.meta.url).resolve("@diverge/client/package.json")), "dist", "cli.js");

const NAMES = {
  c: "(c) MCP SDK → MCP server (baseline)",
  s: "(s) MCP SDK → socat → socat → MCP server (two plain TCP relays)",
  d: "(d) agent → connect --serve-tools → begin scope → proxy → MCP server",
  e: "(e) agent → connect --serve-tools → /tool/* → proxy → MCP server",
  f: "(f) program → proxy → begin-scope channel → provider → MCP server",
  g: "(g) program → proxy → /requests → provider → MCP server",
} as const;
type Key = keyof typeof NAMES;

async function sdkClient(url: string, name: string): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: perRequestSignalFetch() }));
  return client;
}

/** `diverge connect … --serve-tools 127.0.0.1:0` as a process; resolves with its MCP URL. */
async function serveTools(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [...profileArgs("provider"), cli, "connect", ...args, "--serve-tools", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, API_KEY: "bench-key" } });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const url = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0];
    if (url) return { url, child };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`diverge connect did not serve: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export async function paritySuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const seconds = quick ? 0.3 : 3;
  const maxCalls = quick ? 300 : 200_000;
  const concurrencies = [1, 32];
  const closers: (() => Promise<unknown> | unknown)[] = [];
  try {
    const db = await PGlite.create();
    closers.unshift(() => db.close());
    const dbServer = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1" });
    await dbServer.start();
    closers.unshift(() => dbServer.stop());
    const database = { host: "127.0.0.1", port: Number(dbServer.getServerConn().split(":").pop()) };
    const container = await startChild(["container"]);
    closers.unshift(() => container.close());
    const mcpUrl = `http://127.0.0.1:${container.ready.port}/mcp`;
    // Three proxies in front of the one container: one begun by serve-tools, one reached on /tool/*,
    // one per outward transport (begun, and never begun).
    const proxies = await Promise.all([0, 1, 2, 3].map(() => startChild(["proxy", String(container.ready.port)])));
    for (const proxy of proxies) closers.unshift(() => proxy.close());
    const [forD, forE, forF, forG] = proxies as [typeof container, typeof container, typeof container, typeof container];
    const direct = await sdkClient(mcpUrl, "bench-direct");
    closers.unshift(() => direct.close());
    const chain = await socatChain(container.ready.port);
    closers.unshift(() => chain.close());
    const viaSocat = await sdkClient(`http://127.0.0.1:${chain.port}/mcp`, "bench-socat");
    closers.unshift(() => viaSocat.close());

    const d = await serveTools(["--proxy", `ws://127.0.0.1:${forD.ready.port}`, "--arguments", '{"greeting":"Hello"}', "--secret-env", "API_KEY", "--quiet"]);
    closers.unshift(() => d.child.kill("SIGTERM"));
    const e = await serveTools(["--proxy", `ws://127.0.0.1:${forE.ready.port}`, "--transport", "paths", "--quiet"]);
    closers.unshift(() => e.child.kill("SIGTERM"));
    const agentD = await sdkClient(d.url, "agent-d");
    const agentE = await sdkClient(e.url, "agent-e");
    closers.unshift(() => agentD.close(), () => agentE.close());

    const relay = relayToMcp({ url: mcpUrl });
    closers.unshift(() => relay.close());
    const begun = await openContainer(`ws://127.0.0.1:${forF.ready.port}/`, { handlers: mcpProviderHandlers(relay), onPostgres: (announced) => pipePostgres(announced, database) });
    closers.unshift(() => begun.close());
    await begun.beginTools({ arguments: { greeting: "Hello" } });
    const programF = await sdkClient(`http://127.0.0.1:${forF.ready.programPort}/mcp`, "program-f");
    const requests = connectProxy(`ws://127.0.0.1:${forG.ready.port}`, Object.assign(Object.create(relay) as typeof relay, { raw: postgresOverPaths(database) }));
    closers.unshift(() => requests.close());
    await requests.whenConnected();
    const programG = await sdkClient(`http://127.0.0.1:${forG.ready.programPort}/mcp`, "program-g");
    closers.unshift(() => programF.close(), () => programG.close());

    let n = 0;
    const args = () => ({ name: "greet", arguments: { name: `caller ${n++ % 1000}` } });
    const calls: Record<Key, () => Promise<unknown>> = {
      c: () => direct.callTool(args()),
      s: () => viaSocat.callTool(args()),
      d: () => agentD.callTool(args()),
      e: () => agentE.callTool(args()),
      f: () => programF.callTool(args()),
      g: () => programG.callTool(args()),
    };
    const keys = Object.keys(NAMES) as Key[];
    for (const key of keys) {
      const result = (await calls[key]()) as { content?: { text?: string }[] };
      if (!result.content?.[0]?.text?.includes("caller")) throw new Error(`path ${key} answered ${JSON.stringify(result)}`);
      await load(calls[key], 8, quick ? 0.05 : 0.5, quick ? 50 : 2000);
    }
    // CPU per call of each process on a path (the caller is this process; on (f) and (g) the
    // provider is this process too), read from /proc around each run.
    const roles: Record<Key, [string, number | undefined][]> = {
      c: [["server", container.pid]],
      s: [["socat ×2", undefined], ["server", container.pid]],
      d: [["bridge", d.child.pid], ["proxy", forD.pid], ["server", container.pid]],
      e: [["bridge", e.child.pid], ["proxy", forE.pid], ["server", container.pid]],
      f: [["proxy", forF.pid], ["server", container.pid]],
      g: [["proxy", forG.pid], ["server", container.pid]],
    };
    const cpuOf = (key: Key): number[] => [
      ...roles[key].map(([role, pid]) => (role.startsWith("socat") ? chain.pids.reduce((sum, each) => sum + (treeCpuMicros(each) ?? NaN), 0) : pid === undefined ? NaN : (treeCpuMicros(pid) ?? NaN))),
      (() => {
        const usage = process.cpuUsage();
        return usage.user + usage.system;
      })(),
    ];
    const best: Record<Key, Record<string, LoadResult>> = { c: {}, s: {}, d: {}, e: {}, f: {}, g: {} };
    const cpu: Record<Key, Record<string, Record<string, number>>> = { c: {}, s: {}, d: {}, e: {}, f: {}, g: {} };
    for (const concurrency of concurrencies) {
      for (const key of keys) {
        log(`  parity ${key} N=${concurrency}`);
        const before = cpuOf(key);
        const result = await load(calls[key], concurrency, seconds, maxCalls);
        const after = cpuOf(key);
        best[key][String(concurrency)] = result;
        const names = [...roles[key].map(([role]) => role), key === "f" || key === "g" ? "caller and provider" : "caller"];
        cpu[key][String(concurrency)] = Object.fromEntries(names.map((name, i) => [name, (after[i]! - before[i]!) / result.calls]));
      }
    }
    const cpuText = (key: Key, c: number) =>
      Object.entries(cpu[key][String(c)]!)
        .map(([role, micros]) => `${role} ${Number.isFinite(micros) ? micros.toFixed(0) : "?"} µs`)
        .join(", ");
    // Postgres: one connection at a time (PGlite serves one), one-row queries on it.
    const postgres: Record<"p" | "q" | "r", LoadResult> = {} as never;
    const pgTargets = { p: database.port, q: forF.ready.pgPort!, r: forG.ready.pgPort! } as const;
    for (const key of ["p", "q", "r"] as const) {
      const client = new pg.Client({ host: "127.0.0.1", port: pgTargets[key], user: "postgres", database: "postgres" });
      await client.connect();
      let i = 0;
      const query = () => client.query("select $1::int as n", [i++]);
      await load(query, 1, quick ? 0.05 : 0.5, quick ? 50 : 2000);
      log(`  parity postgres ${key}`);
      postgres[key] = await load(query, 1, seconds, maxCalls);
      await client.end();
    }
    const rate = (key: Key, c: number) => best[key][String(c)]!.callsPerSecond;
    const rows = keys.flatMap((key) =>
      concurrencies.map((c) => {
        const r = best[key][String(c)]!;
        return [NAMES[key], String(c), r.callsPerSecond.toFixed(0), `${(r.callsPerSecond / rate("c", c)).toFixed(2)}×`, `${(r.callsPerSecond / rate("s", c)).toFixed(2)}×`, `${r.p50.toFixed(2)} ms`, `${r.p99.toFixed(2)} ms`, String(r.calls), cpuText(key, c)];
      }),
    );
    return {
      result: { paths: best, cpuPerCall: cpu, postgres },
      targets: [
        { case: 8, what: "outward tools/call, begin scope vs /requests, N = 1", goal: "reported", value: `${(rate("f", 1) / rate("g", 1)).toFixed(2)}× (${rate("f", 1).toFixed(0)} vs ${rate("g", 1).toFixed(0)} calls/s)`, met: null },
        { case: 8, what: "outward tools/call, begin scope vs /requests, N = 32", goal: "reported", value: `${(rate("f", 32) / rate("g", 32)).toFixed(2)}× (${rate("f", 32).toFixed(0)} vs ${rate("g", 32).toFixed(0)} calls/s)`, met: null },
        {
          case: 8,
          what: "postgres one-row queries/s: pair vs kind 11 vs direct",
          goal: "reported",
          value: `${postgres.q.callsPerSecond.toFixed(0)} (pair) vs ${postgres.r.callsPerSecond.toFixed(0)} (kind 11) vs ${postgres.p.callsPerSecond.toFixed(0)} (direct)`,
          met: null,
        },
        { case: 8, what: "inward tools/call through --serve-tools, multiplexed vs paths, N = 32", goal: "reported", value: `${rate("d", 32).toFixed(0)} vs ${rate("e", 32).toFixed(0)} calls/s (direct ${rate("c", 32).toFixed(0)})`, met: null },
        ...concurrencies.flatMap((c) =>
          (["d", "e"] as const).map((key) => {
            const goal = key === "d" ? 0.75 : 0.5;
            const ratio = rate(key, c) / rate("s", c);
            return {
              case: 8,
              what: `MCP tools/call through --serve-tools (${key === "d" ? "multiplexed" : "paths"}) vs the two-socat chain, N = ${c}`,
              goal: `≥ ${goal}× the two-socat chain`,
              value: `${ratio.toFixed(2)}× (${rate(key, c).toFixed(0)} vs ${rate("s", c).toFixed(0)} calls/s; direct ${rate("c", c).toFixed(0)}; CPU per call: ${cpuText(key, c)}; the chain's ${cpuText("s", c)})`,
              met: ratio >= goal,
            };
          }),
        ),
      ],
      tables: [
        {
          title: "Case 8: both transports (tools/call greet)",
          columns: ["path", "N", "calls/s", "vs (c)", "vs (s)", "p50", "p99", "calls", "CPU per call"],
          rows,
          notes: [`${seconds} s per path and concurrency; the container, the proxies, diverge connect and the caller are separate processes on the same machine.`],
        },
        {
          title: "Case 8: postgres, one-row queries on one connection (PGlite behind a socket)",
          columns: ["path", "queries/s", "vs direct", "p50", "p99", "queries"],
          rows: ([["p", "(p) pg → database (direct)"], ["q", "(q) pg → proxy → begin-scope pair → provider → database"], ["r", "(r) pg → proxy → /requests kind 11 → provider → database"]] as const).map(([key, name]) => {
            const r = postgres[key];
            return [name, r.callsPerSecond.toFixed(0), `${(r.callsPerSecond / postgres.p.callsPerSecond).toFixed(2)}×`, `${r.p50.toFixed(2)} ms`, `${r.p99.toFixed(2)} ms`, String(r.calls)];
          }),
        },
      ],
    };
  } finally {
    for (const close of closers) {
      try {
        await close();
      } catch {
        // Closing what is already closed.
      }
    }
  }
}
