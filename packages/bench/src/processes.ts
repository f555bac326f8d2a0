// Starting and stopping the child processes of the relay and memory suites, and a bounded load loop.
import { fork, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ChildLoop, ChildMemory, ChildReady } from "./child.js";

// Always the built script (dist/child.js), also when this module runs from src/ under vitest: the
// child is a plain Node process. `pnpm test` builds first (turbo's test depends on build).
const childScript = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "child.js");

/** The part of the proxy's `stats()` the memory suite reads. */
export interface ProxyCounters {
  readonly openChannels?: number;
  readonly pendingAsks?: number;
  readonly postgres?: { readonly maxProgramBuffered?: number; readonly maxProviderBuffered?: number };
}

export interface Child {
  readonly ready: ChildReady;
  /** The child's process id. */
  readonly pid: number;
  /** The child's memory; after two full GCs unless `gc` is false (for sampling while it works). */
  memory(gc?: boolean): Promise<ChildMemory>;
  /** The proxy's counters (`ProxyStats` of @diverge/server). */
  stats(): Promise<ProxyCounters>;
  /** The child's event-loop delay and CPU since the last call (or its start); resets both. */
  loop(): Promise<ChildLoop>;
  close(): Promise<void>;
}

/** The suite running now, for the names of the CPU profiles (`DIVERGE_BENCH_PROFILE=<dir>`). */
let profileLabel = "bench";
const profileCounts = new Map<string, number>();
export function setProfileLabel(label: string): void {
  profileLabel = label;
}

/**
 * With `DIVERGE_BENCH_PROFILE=<dir>`: the Node flags that write a CPU profile of the process started
 * with them to `<dir>/<suite>-<role>[-n].cpuprofile` as it exits; otherwise none.
 */
export function profileArgs(role: string): string[] {
  const dir = process.env.DIVERGE_BENCH_PROFILE;
  if (!dir) return [];
  const key = `${profileLabel}-${role}`;
  const n = (profileCounts.get(key) ?? 0) + 1;
  profileCounts.set(key, n);
  return ["--cpu-prof", `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${key}${n > 1 ? `-${n}` : ""}.cpuprofile`];
}

/** Forks `child.js <args>` and resolves once it says it is listening (at most 30 s). */
export function startChild(args: readonly string[], options: { readonly cpuProfile?: { readonly dir: string; readonly name: string } } = {}): Promise<Child> {
  if (!existsSync(childScript)) return Promise.reject(new Error(`${childScript} is missing: build @diverge/bench first`));
  const auto = ["proxy", "filesystem", "pg-provider", "vault-provider"].includes(args[0] ?? "") ? profileArgs(args[0]!.endsWith("-provider") ? "provider" : "proxy") : [];
  const profile = options.cpuProfile ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfile.dir}`, `--cpu-prof-name=${options.cpuProfile.name}`] : auto;
  // DIVERGE_BENCH_CHILD_FLAGS: more Node flags for every child (e.g. `--trace-gc`, which NODE_OPTIONS refuses).
  const extra = process.env.DIVERGE_BENCH_CHILD_FLAGS?.split(" ").filter(Boolean) ?? [];
  const proc: ChildProcess = fork(childScript, [...args], { execArgv: ["--expose-gc", ...profile, ...extra], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill();
      reject(new Error(`child ${args.join(" ")} did not start within 30 s`));
    }, 30_000);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`child ${args.join(" ")} exited with ${code}`));
    });
    proc.once("message", (ready: ChildReady) => {
      clearTimeout(timer);
      resolve({
        ready,
        pid: proc.pid!,
        memory: (gc = true) =>
          new Promise<ChildMemory>((done) => {
            const onMessage = (m: ChildMemory) => {
              if (m.type === "memory") {
                proc.off("message", onMessage);
                done(m);
              }
            };
            proc.on("message", onMessage);
            proc.send({ type: "memory", gc });
          }),
        stats: () =>
          new Promise<ProxyCounters>((done) => {
            const onMessage = (m: { type: string; stats: ProxyCounters }) => {
              if (m.type === "stats") {
                proc.off("message", onMessage);
                done(m.stats);
              }
            };
            proc.on("message", onMessage);
            proc.send({ type: "stats" });
          }),
        loop: () =>
          new Promise<ChildLoop>((done) => {
            const onMessage = (m: ChildLoop) => {
              if (m.type === "loop") {
                proc.off("message", onMessage);
                done(m);
              }
            };
            proc.on("message", onMessage);
            proc.send({ type: "loop" });
          }),
        close: () =>
          new Promise<void>((done) => {
            if (proc.exitCode !== null) return done();
            const kill = setTimeout(() => proc.kill("SIGKILL"), 5_000);
            proc.once("exit", () => {
              clearTimeout(kill);
              done();
            });
            proc.send({ type: "close" });
          }),
      });
    });
  });
}

export interface LoadResult {
  readonly concurrency: number;
  readonly calls: number;
  readonly seconds: number;
  readonly callsPerSecond: number;
  /** Latency of one call in milliseconds. */
  readonly p50: number;
  readonly p99: number;
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * `concurrency` workers call `call` back to back until `seconds` have passed or `maxCalls` calls
 * have started, whichever is first. Any failed call fails the run.
 */
export async function load(call: () => Promise<unknown>, concurrency: number, seconds: number, maxCalls: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let started = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline && started < maxCalls) {
      started++;
      const t = performance.now();
      await call();
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    concurrency,
    calls: latencies.length,
    seconds: elapsed,
    callsPerSecond: latencies.length / elapsed,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
  };
}

/**
 * Two plain TCP relays in a row (`socat`, two extra processes and two extra hops) in front of
 * `targetPort`: the floor a relay of the proxy's shape can reach on this machine.
 */
export async function socatChain(targetPort: number): Promise<{ readonly port: number; readonly pids: readonly number[]; close(): void }> {
  const { spawn } = await import("node:child_process");
  const { createServer, connect } = await import("node:net");
  const free = async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return port;
  };
  const inner = await free();
  const outer = await free();
  const relays = [
    spawn("socat", [`TCP-LISTEN:${inner},bind=127.0.0.1,fork,reuseaddr,nodelay`, `TCP:127.0.0.1:${targetPort},nodelay`], { stdio: "ignore" }),
    spawn("socat", [`TCP-LISTEN:${outer},bind=127.0.0.1,fork,reuseaddr,nodelay`, `TCP:127.0.0.1:${inner},nodelay`], { stdio: "ignore" }),
  ];
  const close = () => {
    for (const relay of relays) relay.kill("SIGTERM");
  };
  const deadline = Date.now() + 10_000;
  for (const port of [inner, outer]) {
    for (;;) {
      const up = await new Promise<boolean>((resolve) => {
        const probe = connect(port, "127.0.0.1");
        probe.once("connect", () => (probe.destroy(), resolve(true)));
        probe.once("error", () => resolve(false));
      });
      if (up) break;
      if (Date.now() > deadline) {
        close();
        throw new Error("socat did not listen (is socat installed?)");
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  return { port: outer, pids: relays.map((relay) => relay.pid!), close };
}

/**
 * CPU time (user + system) in microseconds a process has used, with that of its children it has
 * waited for (a forking socat's connections), from /proc/<pid>/stat; undefined once it is gone.
 */
export function processCpuMicros(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    // utime, stime, cutime, cstime (fields 14–17 of stat(5)), in clock ticks of 10 ms.
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10_000;
  } catch {
    return undefined;
  }
}

/**
 * CPU time in microseconds of a process and of every process under it now (a forking socat's live
 * connections, whose CPU reaches the parent's count only when they exit), plus the exited children
 * it has waited for; undefined once the process is gone.
 */
export function treeCpuMicros(pid: number): number | undefined {
  const own = processCpuMicros(pid);
  if (own === undefined) return undefined;
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter(Boolean);
  } catch {
    // No children file (an older kernel) or the process just ended: its own count stands.
  }
  return children.reduce((sum, child) => sum + (treeCpuMicros(Number(child)) ?? 0), own);
}
