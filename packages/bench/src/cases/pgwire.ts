// Case 12: the database pair against what a user would pick instead, with the real tools, side by
// side in one run (issue 27). A throwaway PostgreSQL cluster, and `pgbench` (select-only at 1 and 8
// clients, TPC-B at 8) through:
//   direct               pgbench → PostgreSQL
//   socat chain          pgbench → socat → socat → PostgreSQL (two plain TCP relays: the floor)
//   Node relay chain     pgbench → Node → Node → PostgreSQL (two plain Node TCP relays, net.Socket
//                        piped both ways: what a Node hop costs before any WebSocket or frame)
//   multiplexed          pgbench → proxy → begin-scope pair → provider → PostgreSQL
//   paths                pgbench → proxy → /requests kind 11 → provider → PostgreSQL
// The proxy and the provider are processes of their own (child.js), so each can be profiled
// (`DIVERGE_BENCH_PROFILE=<dir>` writes <workload>-{proxy,provider}.cpuprofile there).
// Then the slow reader: `pg_dump` of a 100 MB table into a reader that reads nothing for 15 s, on
// both transports, while another driver runs one-row queries on its own connection: the dump must
// complete, the other driver's p99 is compared with its p99 before the dump, and the proxy's RSS is
// sampled throughout.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import pg from "pg";
import { processCpuMicros, socatChain, startChild, type Child } from "../processes.js";
import type { SuiteReport, Target } from "../run.js";
import { postgresBin, startDatabase } from "./vault.js";

const MB = 1e6;

type Route = "direct" | "socat" | "node" | "multiplexed" | "paths";
const ROUTES: readonly Route[] = ["direct", "socat", "node", "multiplexed", "paths"];
const ROUTE_NAMES: Record<Route, string> = {
  direct: "pgbench → PostgreSQL (direct)",
  socat: "pgbench → socat → socat → PostgreSQL",
  node: "pgbench → Node relay → Node relay → PostgreSQL (plain net.Socket pipes)",
  multiplexed: "pgbench → proxy → begin-scope pair → provider → PostgreSQL",
  paths: "pgbench → proxy → /requests kind 11 → provider → PostgreSQL",
};

interface Workload {
  readonly key: string;
  readonly name: string;
  readonly args: readonly string[];
}
const WORKLOADS: readonly Workload[] = [
  { key: "select-c1", name: "pgbench -S -c 1", args: ["-S", "-c", "1", "-j", "1"] },
  { key: "select-c8", name: "pgbench -S -c 8", args: ["-S", "-c", "8", "-j", "2"] },
  { key: "tpcb-c8", name: "pgbench TPC-B -c 8", args: ["-c", "8", "-j", "2"] },
];

/** How long a pgbench run lasts: a duration (the full bench), or a count of transactions per client
 * (the quick one, so a loaded machine slows it down but cannot leave it with none). */
type Length = { readonly seconds: number } | { readonly perClient: number };

function pgbench(bin: string, port: number, args: readonly string[], length: Length): { tps: number; transactions: number } {
  const bound = "seconds" in length ? ["-T", String(length.seconds)] : ["-t", String(length.perClient)];
  const run = spawnSync(join(bin, "pgbench"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-n", ...bound, ...args, "postgres"], { encoding: "utf8" });
  const tps = /tps = ([0-9.]+) \(without initial connection time\)/.exec(run.stdout)?.[1];
  const transactions = /number of transactions actually processed: (\d+)/.exec(run.stdout)?.[1];
  if (run.status !== 0 || tps === undefined || transactions === undefined) throw new Error(`pgbench ${args.join(" ")} on port ${port} failed: ${run.stderr || run.stdout}`);
  return { tps: Number(tps), transactions: Number(transactions) };
}

interface Relay {
  readonly proxy: Child;
  readonly provider: Child;
  readonly pgPort: number;
}

async function relay(transport: "multiplexed" | "paths", containerPort: number, databaseUrl: string, profile?: { dir: string; name: string }): Promise<Relay> {
  const proxy = await startChild(["proxy", String(containerPort)], profile ? { cpuProfile: { dir: profile.dir, name: `${profile.name}-proxy.cpuprofile` } } : {});
  const provider = await startChild(["pg-provider", String(proxy.ready.port), transport, databaseUrl], profile ? { cpuProfile: { dir: profile.dir, name: `${profile.name}-provider.cpuprofile` } } : {});
  // The provider's connection is up once a driver is carried: wait for one query to pass.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const client = new pg.Client({ host: "127.0.0.1", port: proxy.ready.pgPort!, user: "postgres", database: "postgres", connectionTimeoutMillis: 5000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("select 1");
      await client.end();
      break;
    } catch (problem) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw problem;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { proxy, provider, pgPort: proxy.ready.pgPort! };
}

/** What one stretch of the slow-reader case cost: the other driver's latencies and each process's loop. */
export interface SlowPhase {
  /** Wall time of the stretch, in seconds. */
  readonly seconds: number;
  /** The other driver's queries in it, and their p50/p99/max in milliseconds. */
  readonly queries: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Event-loop delay (perf_hooks `monitorEventLoopDelay`, 1 ms resolution) p99 and max, and CPU used (ms of CPU per s of wall), of the proxy, the provider and this process (the other driver's and the reader's). */
  readonly loop: Record<"proxy" | "provider" | "bench", { readonly p99: number; readonly max: number; readonly cpuPerSecond: number }>;
}

interface SlowReader {
  readonly transport: "multiplexed" | "paths";
  /** The reader's pause in ms: 0 is the control (the same dump read at once, nothing spilled). */
  readonly pauseMs: number;
  readonly completed: boolean;
  readonly bytes: number;
  readonly seconds: number;
  readonly error?: string;
  readonly p99Before: number;
  readonly p99During: number;
  readonly queriesDuring: number;
  readonly rssStart: number;
  readonly rssPeak: number;
  readonly rssEnd: number;
  /** Heap and external (Buffers) memory: what the proxy holds, without the allocator's retained pages. */
  readonly heldStart: number;
  readonly heldPeak: number;
  readonly spilled?: number;
  /** Before the dump, while the reader pauses, while it drains (after the pause until the dump exits). */
  readonly phases: { readonly before: SlowPhase; readonly pause?: SlowPhase; readonly drain: SlowPhase };
  /** The proxy's spill counters over the run (multiplexed): disk writes, their ms together and at most, connection pauses for writes behind, and their ms. */
  readonly disk?: { readonly writes: number; readonly writeMs: number; readonly maxWriteMs: number; readonly holds: number; readonly heldMs: number };
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? NaN;
}

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
}

/** One-row queries on a connection of their own until `stop()`: their latencies, and when each began. */
function otherChannel(port: number): { stop(): Promise<number[]>; readonly samples: { at: number; ms: number }[] } {
  const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "postgres" });
  client.on("error", () => {});
  const latencies: number[] = [];
  const samples: { at: number; ms: number }[] = [];
  let running = true;
  const loop = (async () => {
    await client.connect();
    let i = 0;
    while (running) {
      const start = performance.now();
      await client.query("select $1::int as n", [i++]);
      const ms = performance.now() - start;
      latencies.push(ms);
      samples.push({ at: start, ms });
      // A steady light load, not a flood: one query each 2 ms.
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await client.end();
  })();
  return {
    samples,
    async stop() {
      running = false;
      await loop;
      return latencies;
    },
  };
}

interface SpillCounters {
  readonly spilledBytes?: number;
  readonly spillWrites?: number;
  readonly spillWriteMs?: number;
  readonly maxSpillWriteMs?: number;
  readonly spillHolds?: number;
  readonly spillHeldMs?: number;
}

async function slowReader(bin: string, transport: "multiplexed" | "paths", r: Relay, pauseMs: number, quick: boolean): Promise<SlowReader> {
  const first = await r.proxy.memory(false);
  const rssStart = first.rss;
  const heldStart = first.heapUsed + first.external;
  let heldPeak = heldStart;
  const statsBefore = ((await r.proxy.stats()) as { postgres?: SpillCounters }).postgres ?? {};
  // This process's own loop: the other driver and the dump's reader both run on it.
  const benchDelay = monitorEventLoopDelay({ resolution: 1 });
  benchDelay.enable();
  let benchCpu = process.cpuUsage();
  let phaseStart = performance.now();
  const phase = async (latencies: { at: number; ms: number }[], from: number): Promise<SlowPhase> => {
    const [proxy, provider] = await Promise.all([r.proxy.loop(), r.provider.loop()]);
    const now = performance.now();
    const cpu = process.cpuUsage(benchCpu);
    const wall = now - phaseStart;
    const bench = { p99: benchDelay.percentile(99) / 1e6, max: benchDelay.max / 1e6, cpuPerSecond: (cpu.user + cpu.system) / 1000 / (wall / 1000) };
    benchDelay.reset();
    benchCpu = process.cpuUsage();
    phaseStart = now;
    const ms = latencies.filter((l) => l.at >= from && l.at < now).map((l) => l.ms);
    const of = (l: { p99: number; max: number; cpuMs: number; wallMs: number }) => ({ p99: l.p99, max: l.max, cpuPerSecond: l.cpuMs / (l.wallMs / 1000) });
    return { seconds: wall / 1000, queries: ms.length, p50: percentile(ms, 0.5), p99: percentile(ms, 0.99), max: Math.max(...ms), loop: { proxy: of(proxy), provider: of(provider), bench } };
  };
  await Promise.all([r.proxy.loop(), r.provider.loop()]);
  const baseline = otherChannel(r.pgPort);
  await new Promise((resolve) => setTimeout(resolve, quick ? 200 : 2000));
  const before = await baseline.stop();
  const beforePhase = await phase(baseline.samples, 0);
  const during = otherChannel(r.pgPort);
  let rssPeak = rssStart;
  const sampler = setInterval(() => {
    void r.proxy.memory(false).then((m) => {
      rssPeak = Math.max(rssPeak, m.rss);
      heldPeak = Math.max(heldPeak, m.heapUsed + m.external);
    });
  }, 250);
  const start = performance.now();
  const dump = spawn(join(bin, "pg_dump"), ["-h", "127.0.0.1", "-p", String(r.pgPort), "-U", "postgres", "-t", "big", "postgres"], { stdio: ["ignore", "pipe", "pipe"] });
  if (pauseMs > 0) dump.stdout.pause();
  let stderr = "";
  dump.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  let bytes = 0;
  const exited = new Promise<number | null>((resolve) => dump.once("close", resolve));
  let pausePhase: SlowPhase | undefined;
  if (pauseMs > 0) {
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pausePhase = await phase(during.samples, start);
  }
  const drainFrom = performance.now();
  dump.stdout.on("data", (chunk: Buffer) => (bytes += chunk.length));
  dump.stdout.resume();
  const code = await exited;
  const seconds = (performance.now() - start) / 1000;
  const drainPhase = await phase(during.samples, drainFrom);
  benchDelay.disable();
  const duringLatencies = await during.stop();
  clearInterval(sampler);
  const rssEnd = (await r.proxy.memory(false)).rss;
  const after = ((await r.proxy.stats()) as { postgres?: SpillCounters }).postgres ?? {};
  const delta = (key: keyof SpillCounters) => (after[key] ?? 0) - (statsBefore[key] ?? 0);
  return {
    transport,
    pauseMs,
    completed: code === 0,
    bytes,
    seconds,
    error: code === 0 ? undefined : stderr.trim().split("\n").pop(),
    p99Before: p99(before),
    p99During: p99(duringLatencies),
    queriesDuring: duringLatencies.length,
    rssStart,
    rssPeak,
    rssEnd,
    heldStart,
    heldPeak,
    spilled: transport === "multiplexed" ? delta("spilledBytes") : undefined,
    phases: { before: beforePhase, pause: pausePhase, drain: drainPhase },
    disk:
      transport === "multiplexed"
        ? { writes: delta("spillWrites"), writeMs: delta("spillWriteMs"), maxWriteMs: Math.max(after.maxSpillWriteMs ?? 0), holds: delta("spillHolds"), heldMs: delta("spillHeldMs") }
        : undefined,
  };
}

/**
 * The slow reader: a 100 MB table dumped into a reader that reads nothing for 15 s, on both
 * transports, each after a control (the same dump read at once) on the same relay.
 */
export async function slowReaderCase(bin: string, containerPort: number, databaseUrl: string, quick: boolean, log: (line: string) => void, profileDir?: string): Promise<SlowReader[]> {
  const setup = new pg.Client({ connectionString: databaseUrl });
  await setup.connect();
  const rows = quick ? 16_000 : 160_000;
  await setup.query(`DROP TABLE IF EXISTS big`);
  await setup.query(`CREATE TABLE big AS SELECT g, repeat(md5(g::text), 20) AS t FROM generate_series(1, ${rows}) g`);
  await setup.end();
  const pauseMs = quick ? 1000 : 15_000;
  const runs: SlowReader[] = [];
  for (const transport of ["multiplexed", "paths"] as const) {
    const r = await relay(transport, containerPort, databaseUrl, profileDir ? { dir: profileDir, name: `slow-reader-${transport}` } : undefined);
    try {
      log(`  pgwire slow reader (${transport}): the control, the dump read at once`);
      runs.push(await slowReader(bin, transport, r, 0, quick));
      log(`  pgwire slow reader (${transport}), a ${pauseMs / 1000} s pause`);
      runs.push(await slowReader(bin, transport, r, pauseMs, quick));
    } finally {
      await r.provider.close();
      await r.proxy.close();
    }
  }
  return runs;
}

export async function pgwireSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const bin = postgresBin();
  if (!bin) throw new Error("no PostgreSQL binaries (pgbench, pg_dump): install Debian's postgresql");
  const length: Length = quick ? { perClient: 100 } : { seconds: 3 };
  const rounds = quick ? 1 : 4;
  const profileDir = process.env.DIVERGE_BENCH_PROFILE;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const closers: (() => Promise<unknown> | unknown)[] = [];
  try {
    const database = await startDatabase();
    closers.unshift(() => database.stop());
    const port = Number(new URL(database.url).port);
    const init = spawnSync(join(bin, "pgbench"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-i", "-s", "1", "-q", "postgres"], { encoding: "utf8" });
    if (init.status !== 0) throw new Error(`pgbench -i failed: ${init.stderr}`);
    const container = await startChild(["container"]);
    closers.unshift(() => container.close());
    const chain = await socatChain(port);
    closers.unshift(() => chain.close());
    // Two plain Node relays in a row, processes of the same harness as the proxy and the provider.
    const innerRelay = await startChild(["tcp-relay", String(port)]);
    closers.unshift(() => innerRelay.close());
    const outerRelay = await startChild(["tcp-relay", String(innerRelay.ready.port)]);
    closers.unshift(() => outerRelay.close());

    // tps[workload][route]: the best of the rounds, every route once per round, in turn.
    const tps: Record<string, Record<Route, number[]>> = {};
    for (const workload of WORKLOADS) tps[workload.key] = { direct: [], socat: [], node: [], multiplexed: [], paths: [] };
    const relays: Partial<Record<"multiplexed" | "paths", Relay>> = {};
    for (const transport of ["multiplexed", "paths"] as const) {
      const r = await relay(transport, container.ready.port, database.url, profileDir ? { dir: profileDir, name: `pgbench-${transport}` } : undefined);
      relays[transport] = r;
      closers.unshift(() => r.provider.close(), () => r.proxy.close());
    }
    // CPU per round trip of each relay process under pgbench -S -c 1: [proxy, provider] or [socat, socat].
    const cpuPerTx: Partial<Record<Route, number[]>> = {};
    const relayCpu = async (route: Route): Promise<number[]> => {
      if (route === "direct") return [];
      if (route === "socat") return chain.pids.map((pid) => processCpuMicros(pid) ?? NaN);
      if (route === "node") return [(await outerRelay.memory(false)).cpu ?? NaN, (await innerRelay.memory(false)).cpu ?? NaN];
      const r = relays[route]!;
      return [(await r.proxy.memory(false)).cpu ?? NaN, (await r.provider.memory(false)).cpu ?? NaN];
    };
    const portOf: Record<Route, number> = { direct: port, socat: chain.port, node: outerRelay.ready.port, multiplexed: relays.multiplexed!.pgPort, paths: relays.paths!.pgPort };
    for (let round = 0; round < rounds; round++) {
      for (const workload of WORKLOADS) {
        for (const route of ROUTES) {
          log(`  pgwire ${workload.name} ${route} (round ${round + 1} of ${rounds})`);
          const cpuBefore = workload.key === "select-c1" ? await relayCpu(route) : undefined;
          const run = pgbench(bin, portOf[route], workload.args, length);
          tps[workload.key]![route].push(run.tps);
          if (cpuBefore) {
            // The socats' forked connections are counted once their listener has waited for them.
            await new Promise((resolve) => setTimeout(resolve, 300));
            const after = await relayCpu(route);
            const perTx = after.map((c, i) => (c - cpuBefore[i]!) / run.transactions);
            const prev = cpuPerTx[route];
            // The round with the least CPU per round trip (the least disturbed by the machine); a
            // round where a process shows none was not measured (a socat's forked connection not
            // yet waited for by its listener when the machine is loaded).
            if (perTx.length && perTx.every((c) => c > 0) && (!prev || perTx.reduce((a, b) => a + b, 0) < prev.reduce((a, b) => a + b, 0))) cpuPerTx[route] = perTx;
          }
        }
      }
    }
    // The profiles are written as the relays exit.
    for (const transport of ["multiplexed", "paths"] as const) {
      await relays[transport]!.provider.close();
      await relays[transport]!.proxy.close();
    }

    const rows = quick ? 16_000 : 160_000;
    const pauseMs = quick ? 1000 : 15_000;
    const all = await slowReaderCase(bin, container.ready.port, database.url, quick, log, profileDir);
    const slow = all.filter((s) => s.pauseMs > 0);

    const best = (key: string, route: Route) => Math.max(...tps[key]![route]);
    const targets: Target[] = [];
    for (const workload of WORKLOADS) {
      for (const transport of ["multiplexed", "paths"] as const) {
        const ratio = best(workload.key, transport) / best(workload.key, "socat");
        targets.push({
          case: 12,
          what: `${workload.name} through the proxy (${transport}) vs the two-socat chain`,
          goal: "≥ 0.9× the two-socat chain",
          value: `${ratio.toFixed(2)}× (${best(workload.key, transport).toFixed(0)} vs ${best(workload.key, "socat").toFixed(0)} tps; direct ${best(workload.key, "direct").toFixed(0)})`,
          met: ratio >= 0.9,
        });
      }
    }
    for (const s of slow) {
      const rise = (s.rssPeak - s.rssStart) / MB;
      targets.push({
        case: 12,
        what: `slow reader (${s.transport}): pg_dump of ${(s.bytes / MB || rows * 0.000656).toFixed(0)} MB into a reader pausing ${pauseMs / 1000} s`,
        goal: "completes; the other driver's p99 unchanged (≤ 2× its p99 before); proxy RSS flat (peak ≤ 64 MB over the start)",
        value: `${s.completed ? "completed" : `failed (${s.error})`}, ${(s.bytes / MB).toFixed(0)} MB in ${s.seconds.toFixed(1)} s; other driver p99 ${s.p99During.toFixed(2)} ms during vs ${s.p99Before.toFixed(2)} ms before (${s.queriesDuring} queries); proxy RSS ${(s.rssStart / MB).toFixed(0)} → peak ${(s.rssPeak / MB).toFixed(0)} → ${(s.rssEnd / MB).toFixed(0)} MB (heap + external ${(s.heldStart / MB).toFixed(0)} → peak ${(s.heldPeak / MB).toFixed(0)} MB)${s.spilled !== undefined ? `; ${(s.spilled / MB).toFixed(0)} MB through disk` : ""}`,
        met: s.completed && s.p99During <= Math.max(2 * s.p99Before, s.p99Before + 1) && rise <= 64,
      });
    }
    return {
      result: { tps, cpuPerTx, slow, control: all.filter((s) => s.pauseMs === 0) },
      targets,
      tables: [
        {
          title: "Case 12: pgwire: pgbench through each route (tps, best of rounds)",
          columns: ["route", ...WORKLOADS.map((w) => w.name), ...WORKLOADS.map((w) => `${w.name} vs socat chain`)],
          rows: ROUTES.map((route) => [
            ROUTE_NAMES[route],
            ...WORKLOADS.map((w) => best(w.key, route).toFixed(0)),
            ...WORKLOADS.map((w) => `${(best(w.key, route) / best(w.key, "socat")).toFixed(2)}×`),
          ]),
          notes: [
            `CPU per round trip under pgbench -S -c 1 (user + system of each relay process over its run, the round with the least): ` +
              (["socat", "node", "multiplexed", "paths"] as const)
                .filter((route) => cpuPerTx[route])
                .map((route) => `${route} ${cpuPerTx[route]!.map((c) => `${c.toFixed(0)} µs`).join(" + ")}${route === "socat" ? " (the two socats)" : route === "node" ? " (the two Node relays)" : " (proxy + provider)"}`)
                .join("; ") +
              ".",
            `${database.what}; pgbench -i -s 1; ${"seconds" in length ? `${length.seconds} s per run` : `${length.perClient} transactions per client per run`}, ${rounds} rounds with every route in turn; each cell the best round. Proxy, provider, socat, the Node relays and pgbench are separate processes on the same 2 cores.`,
          ],
        },
        {
          title: "Case 12: pgwire: a slow reader (pg_dump into a reader that pauses)",
          columns: ["transport", "completed", "MB", "seconds", "other driver p99 before", "p99 during", "proxy RSS start", "peak", "end", "heap + external start", "peak", "through disk"],
          rows: slow.map((s) => [
            s.transport,
            s.completed ? "yes" : `no: ${s.error}`,
            (s.bytes / MB).toFixed(0),
            s.seconds.toFixed(1),
            `${s.p99Before.toFixed(2)} ms`,
            `${s.p99During.toFixed(2)} ms`,
            `${(s.rssStart / MB).toFixed(0)} MB`,
            `${(s.rssPeak / MB).toFixed(0)} MB`,
            `${(s.rssEnd / MB).toFixed(0)} MB`,
            `${(s.heldStart / MB).toFixed(0)} MB`,
            `${(s.heldPeak / MB).toFixed(0)} MB`,
            s.spilled !== undefined ? `${(s.spilled / MB).toFixed(0)} MB` : "— (paths: pushed back per path)",
          ]),
          notes: [`The reader reads nothing for ${pauseMs / 1000} s, then everything; the other driver runs one-row queries (one each 2 ms) on its own connection through the same proxy.`],
        },
        {
          title: "Case 12: pgwire: the slow reader's stretches, against a control (the same dump read at once)",
          columns: ["transport", "run", "stretch", "s", "other driver queries", "p50", "p99", "max", "proxy loop delay p99 / max", "proxy CPU", "provider loop delay p99 / max", "provider CPU", "bench loop p99 / max", "bench CPU"],
          rows: all.flatMap((s) =>
            (["before", "pause", "drain"] as const).flatMap((name) => {
              const p = s.phases[name];
              if (!p) return [];
              const loop = (l: SlowPhase["loop"]["proxy"]) => [`${l.p99.toFixed(1)} / ${l.max.toFixed(0)} ms`, `${(l.cpuPerSecond / 10).toFixed(0)}%`];
              return [[
                s.transport,
                s.pauseMs > 0 ? `pause ${s.pauseMs / 1000} s` : "control",
                name,
                p.seconds.toFixed(1),
                String(p.queries),
                `${p.p50.toFixed(2)} ms`,
                `${p.p99.toFixed(2)} ms`,
                `${p.max.toFixed(1)} ms`,
                ...loop(p.loop.proxy),
                ...loop(p.loop.provider),
                ...loop(p.loop.bench),
              ]];
            }),
          ),
          notes: [
            "Loop delay: perf_hooks monitorEventLoopDelay (1 ms resolution) in each process, reset at each stretch; CPU: user + system per second of wall time (100% = one core). The bench process runs the other driver and the dump's reader.",
            ...all
              .filter((s) => s.disk)
              .map((s) => `${s.transport} ${s.pauseMs > 0 ? "pause" : "control"}: ${((s.spilled ?? 0) / MB).toFixed(0)} MB spilled in ${s.disk!.writes} disk writes (${s.disk!.writeMs.toFixed(0)} ms in writev callbacks together, at most ${s.disk!.maxWriteMs.toFixed(1)} ms); the connection paused ${s.disk!.holds} times for writes behind (${s.disk!.heldMs.toFixed(0)} ms).`),
          ],
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
