// The families soak (issue 24): seeded scenarios of the families added last, each checking invariants,
// never timings. Every random choice comes from the seed; a duration only says how many rounds run.
//
// - vault: two proxies (two containers, holders "soak-a" and "soak-b") in front of one PostgreSQL
//   store, container A's provider on `/` (multiplexed), B's on `/requests` (paths). Programs race
//   lock/unlock on the same keys, some leave while waiting. Checked: at no moment do both containers
//   hold a key (a log of grants and releases, each container's interval taken inside its real one),
//   no lock is held by a departed waiter after the run (a third holder takes every key), every put is
//   readable through both proxies.
// - command (paths only): `diverge answer --command-exec` running a script that starts a grandchild
//   and floods lines; mid-stream the program leaves, or the provider is stopped (SIGTERM) and started
//   again. Checked: no process of any command's group survives (/proc), the next command runs.
// - write: filesystem::write and /filesystem/write of files under the proxy's --root given up
//   mid-content (the source fails, the writer aborts, the connection is cut). Checked: the destination
//   is the old file or the new one whole, never partial; no temporary is left; a later write succeeds.
// - fuse: a kernel FUSE mount served by the provider's directory on either transport, programs (shell
//   loops in child processes) working in it, then the provider's connection ends. Checked: every
//   program's operations end (a hang guard, not a timing), the mount is gone (multiplexed) or fails
//   with EIO (paths), and a new mount at the same path serves the new provider's files.
// - memory: the proxy's (a process of its own) and the provider's RSS sampled across each scenario;
//   the last third's median is within a generous factor of the first third's.
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest, type ClientRequest } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { connectProxy, filesystemPaths, openContainer, PathsMounts, PostgresVault, type MultiplexedConnection, type PathsConnection } from "@diverge/client";
import { fuseUnavailable, isMountPoint } from "@diverge/server";
import { startExampleContainer } from "@diverge/example-container";
import { postgresUnavailable, startThrowawayPostgres } from "./postgres.js";
import { random } from "./soak.js";

export const FAMILY_SCENARIOS = ["vault", "command", "write", "fuse"] as const;
export type FamilyScenario = (typeof FAMILY_SCENARIOS)[number];

export interface FamilySoakOptions {
  readonly seed: number;
  /** Rounds of each scenario (deterministic); with `seconds`, the least number of rounds. Default 3. */
  readonly rounds?: number;
  /** Each scenario runs rounds until this many seconds have passed (and at least `rounds`). */
  readonly seconds?: number;
  readonly scenarios?: readonly FamilyScenario[];
  /** The last third's median RSS may be at most this many times the first third's. Default 2. */
  readonly rssFactor?: number;
  readonly log?: (line: string) => void;
}

export interface RssFigures {
  readonly samples: number;
  readonly firstMiB: number;
  readonly lastMiB: number;
  readonly peakMiB: number;
}

export interface ScenarioReport {
  readonly scenario: FamilyScenario;
  /** Why it did not run here (no PostgreSQL, no FUSE), or undefined. */
  readonly skipped?: string;
  readonly rounds: number;
  readonly seconds: number;
  readonly counts: Record<string, number>;
  readonly rss: Record<string, RssFigures>;
  readonly failures: readonly string[];
}

export interface FamilySoakReport {
  readonly seed: number;
  readonly scenarios: readonly ScenarioReport[];
  readonly failures: readonly string[];
}

// ---------------------------------------------------------------------------------------------------
// Shared pieces

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const HANG_GUARD_MS = 30_000;
const debug = (line: string) => void (process.env.DIVERGE_SOAK_DEBUG && process.stderr.write(`${line}\n`));

/** Resolves once `check` holds; false after the hang guard. */
async function until(check: () => boolean | Promise<boolean>, ms = HANG_GUARD_MS): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

function packageDir(name: string): string {
  return dirname(dirname(createRequire(import.meta.url).resolve(name)));
}

/** Each cleanup in reverse, each bounded by the hang guard (one that hangs is a failure of its own). */
async function runCleanups(cleanups: (() => Promise<unknown>)[], failures: Failures): Promise<void> {
  for (const [index, cleanup] of cleanups.map((c, i) => [i, c] as const).reverse()) {
    debug(`cleanup #${index}: ${String(cleanup).replace(/\s+/g, " ").slice(0, 60)}`);
    const ended = await Promise.race([cleanup().then(() => true, () => true), sleep(HANG_GUARD_MS).then(() => false)]);
    if (!ended) failures.add(`cleanup: ${String(cleanup).replace(/\s+/g, " ").slice(0, 80)} (#${index}) did not end within ${HANG_GUARD_MS} ms`);
  }
}

class Failures {
  readonly list: string[] = [];
  add(text: string): void {
    if (this.list.length < 50) this.list.push(text);
  }
}

function rssOf(pid: number): number | undefined {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};
const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** RSS of named processes sampled every 100 ms (a name's pid may change: a restarted provider). */
class RssSampler {
  private readonly series = new Map<string, number[]>();
  private readonly pids = new Map<string, () => number | undefined>();
  private readonly timer = setInterval(() => this.sample(), 100);
  watch(name: string, pid: () => number | undefined): void {
    this.pids.set(name, pid);
    this.series.set(name, []);
  }
  sample(): void {
    for (const [name, pid] of this.pids) {
      const id = pid();
      const rss = id === undefined ? undefined : rssOf(id);
      if (rss !== undefined) this.series.get(name)!.push(rss);
    }
  }
  stop(factor: number, failures: Failures): Record<string, RssFigures> {
    clearInterval(this.timer);
    this.sample();
    const out: Record<string, RssFigures> = {};
    for (const [name, values] of this.series) {
      const third = Math.max(1, Math.floor(values.length / 3));
      const first = median(values.slice(0, third));
      const last = median(values.slice(-third));
      out[name] = { samples: values.length, firstMiB: mib(first), lastMiB: mib(last), peakMiB: mib(Math.max(0, ...values)) };
      // Flat: the last third's median within `factor` of the first third's (with 16 MiB of slack for a small start).
      if (values.length >= 6 && last > first * factor + 16 * 2 ** 20) failures.add(`memory: ${name} RSS grew from ${mib(first)} MiB (first third's median) to ${mib(last)} MiB (last third's), over ${factor}x`);
    }
    return out;
  }
}

interface ProxyProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly programPort: number;
  readonly url: string;
  stop(): Promise<void>;
}

/** The proxy's own CLI in a process of its own, so its memory is its own. */
async function proxyProcess(extra: readonly string[]): Promise<ProxyProcess> {
  const cli = join(packageDir("@diverge/server"), "dist", "cli.js");
  const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet", ...extra], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => {
    out += chunk.toString();
    debug(`proxy ${child.pid}: ${chunk.toString().trimEnd()}`);
  });
  const ready = await until(() => /program http:\/\/127\.0\.0\.1:\d+/.test(out) || child.exitCode !== null);
  if (!ready || child.exitCode !== null) {
    child.kill("SIGKILL");
    throw new Error(`the proxy did not start: ${out}`);
  }
  const port = Number(/provider ws:\/\/[^:]+:(\d+)/.exec(out)![1]);
  return {
    child,
    port,
    programPort: Number(/program http:\/\/127\.0\.0\.1:(\d+)/.exec(out)![1]),
    url: `ws://127.0.0.1:${port}`,
    stop: () => stopChild(child),
  };
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill(signal);
  if (!(await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]))) {
    child.kill("SIGKILL");
    await exited;
  }
}

/** One HTTP request from a program; `leave()` destroys it (the program gone). */
function call(port: number, method: string, path: string, body?: string): { done: Promise<{ status: number; text: string } | "left">; leave(): void; answered(): boolean } {
  let req!: ClientRequest;
  let answered = false;
  let left = false;
  const done = new Promise<{ status: number; text: string } | "left">((resolve) => {
    req = httpRequest({ host: "127.0.0.1", port, method, path, agent: false, headers: body === undefined ? {} : { "content-length": Buffer.byteLength(body) } }, (response) => {
      answered = true;
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      response.on("error", () => resolve("left"));
    });
    req.on("error", (error) => resolve(left ? "left" : { status: 0, text: error.message }));
    req.end(body);
  });
  return {
    done,
    leave: () => {
      left = true;
      req.destroy();
    },
    answered: () => answered,
  };
}

/** Whether the scenario still has rounds to run. */
function moreRounds(options: FamilySoakOptions, round: number, started: number, share: number): boolean {
  const least = options.rounds ?? 3;
  if (round < least) return true;
  return options.seconds !== undefined && (performance.now() - started) / 1000 < share;
}

function tempDir(prefix: string): string {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)));
}

// ---------------------------------------------------------------------------------------------------
// vault

async function vaultScenario(options: FamilySoakOptions, share: number): Promise<ScenarioReport> {
  const unavailable = postgresUnavailable();
  if (unavailable) return { scenario: "vault", skipped: unavailable, rounds: 0, seconds: 0, counts: {}, rss: {}, failures: [] };
  const failures = new Failures();
  const rng = random(options.seed ^ 0x7a017);
  const counts: Record<string, number> = { grants: 0, releases: 0, departedWhileRacing: 0, departedWaiting: 0, puts: 0, readBack: 0, overlaps: 0 };
  const started = performance.now();
  const cleanups: (() => Promise<unknown>)[] = [];
  const sampler = new RssSampler();
  let rss: Record<string, RssFigures> = {};
  let rounds = 0;
  try {
    const postgres = await startThrowawayPostgres();
    cleanups.push(() => postgres.stop());
    const app = await startExampleContainer();
    cleanups.push(() => app.close());
    const namespace = `soak-${options.seed}`;
    const vaults = await Promise.all(["soak-a", "soak-b", "soak-c"].map((holder) => PostgresVault.connect(postgres.url, { namespace, holder })));
    for (const vault of vaults) cleanups.push(() => vault.close());
    const [vaultA, vaultB, vaultC] = vaults as [PostgresVault, PostgresVault, PostgresVault];
    const proxyA = await proxyProcess(["--app-port", String(app.port)]);
    cleanups.push(() => proxyA.stop());
    const proxyB = await proxyProcess(["--app-port", String(app.port)]);
    cleanups.push(() => proxyB.stop());
    // Container A's provider is begun on / (the begin scope's vault asks); B's holds /requests.
    const muxA = await openContainer(proxyA.url, { handlers: vaultA.handlers() });
    cleanups.push(() => muxA.close());
    await muxA.beginTools({ arguments: { greeting: "Hi" } });
    const pathsB = connectProxy(proxyB.url, vaultB.handlers(), { minBackoffMs: 10, maxBackoffMs: 50 });
    cleanups.push(() => pathsB.close());
    await pathsB.whenConnected({ timeoutMs: 20_000 });
    sampler.watch("proxy A", () => proxyA.child.pid);
    sampler.watch("proxy B", () => proxyB.child.pid);
    sampler.watch("providers (this process)", () => process.pid);

    const containers = [
      { name: "A", port: proxyA.programPort, vault: vaultA },
      { name: "B", port: proxyB.programPort, vault: vaultB },
    ] as const;
    const KEYS = ["k0", "k1", "k2"];
    // What each container's programs believe they hold: from the 204 of a lock to the unlock's sending.
    const holding = new Map<string, string>();
    const log: string[] = [];
    const puts = new Map<string, string>();

    const lane = async (container: (typeof containers)[number], key: string, steps: number, laneRng: () => number, round: number) => {
      for (let step = 0; step < steps; step++) {
        const departs = laneRng() < 0.2;
        const leaveAfter = 1 + Math.floor(laneRng() * 30);
        const holdFor = Math.floor(laneRng() * 15);
        const putToo = laneRng() < 0.5;
        const asked = call(container.port, "POST", `/vault/${key}/lock?ttl=5`);
        let timer: NodeJS.Timeout | undefined;
        if (departs) timer = setTimeout(() => void (asked.answered() || asked.leave()), leaveAfter);
        const answer = await asked.done;
        clearTimeout(timer);
        if (answer === "left") {
          counts.departedWhileRacing!++;
          log.push(`${container.name} ${key} departed`);
          continue;
        }
        if (answer.status !== 204) {
          failures.add(`vault: lock ${key} through ${container.name}: ${answer.status} ${answer.text}`);
          continue;
        }
        counts.grants!++;
        log.push(`${container.name} ${key} granted`);
        const other = holding.get(key);
        if (other !== undefined && other !== container.name) {
          counts.overlaps!++;
          failures.add(`vault: ${key} granted to ${container.name} while ${other} holds it (round ${round}, seed ${options.seed}; log tail: ${log.slice(-8).join("; ")})`);
        }
        holding.set(key, container.name);
        if (holdFor > 0) await sleep(holdFor);
        if (putToo) {
          const putKey = `put-${container.name}-${key}-${round}-${step}`;
          const value = `value ${putKey} ${Math.floor(laneRng() * 1e9)}`;
          const put = await call(container.port, "PUT", `/vault/${putKey}`, value).done;
          if (put === "left" || put.status !== 204) failures.add(`vault: PUT ${putKey}: ${put === "left" ? "left" : `${put.status} ${put.text}`}`);
          else {
            puts.set(putKey, value);
            counts.puts!++;
          }
        }
        if (holding.get(key) === container.name) holding.delete(key);
        log.push(`${container.name} ${key} released`);
        counts.releases!++;
        const unlocked = await call(container.port, "POST", `/vault/${key}/unlock`).done;
        if (unlocked === "left" || unlocked.status !== 204) failures.add(`vault: unlock ${key} through ${container.name} after its grant: ${unlocked === "left" ? "left" : `${unlocked.status} ${unlocked.text}`} (round ${round}, seed ${options.seed})`);
      }
    };

    for (; moreRounds(options, rounds, started, share); rounds++) {
      // Racing: each container has one lane per key (its programs one after another, since the lock
      // holder is the container); the two containers' lanes race on every key.
      const steps = 6;
      await Promise.all(containers.flatMap((container) => KEYS.map((key) => lane(container, key, steps, random(Math.floor(rng() * 2 ** 32)), rounds))));
      // A departed waiter: B holds the key, a program of A waits and leaves, B unlocks; the lock must
      // not stay with A (the third holder takes it at once).
      const key = KEYS[Math.floor(rng() * KEYS.length)]!;
      const [holder, waiter] = rng() < 0.5 ? [containers[1], containers[0]] : [containers[0], containers[1]];
      const held = await call(holder.port, "POST", `/vault/${key}/lock?ttl=60`).done;
      if (held === "left" || held.status !== 204) failures.add(`vault: lock ${key} through ${holder.name}: ${JSON.stringify(held)}`);
      const attempts = waiter.vault.lockAttempts;
      const waiting = call(waiter.port, "POST", `/vault/${key}/lock?ttl=3600`);
      if (!(await until(() => waiter.vault.lockAttempts >= attempts + 2))) failures.add(`vault: the waiter through ${waiter.name} never asked`);
      waiting.leave();
      await waiting.done;
      counts.departedWaiting!++;
      const unlocked = await call(holder.port, "POST", `/vault/${key}/unlock`).done;
      if (unlocked === "left" || unlocked.status !== 204) failures.add(`vault: unlock ${key} through ${holder.name}: ${JSON.stringify(unlocked)}`);
      const third = vaultC.lock(key, 5);
      const answered = await Promise.race([third.then(() => true), sleep(HANG_GUARD_MS).then(() => false)]);
      if (!answered) failures.add(`vault: ${key} still held after its waiter through ${waiter.name} left (round ${rounds}, seed ${options.seed})`);
      else if ((await third)?.variant !== "Done") failures.add(`vault: the third holder's lock of ${key}: ${JSON.stringify(await third)}`);
      await vaultC.unlock(key);
    }

    // After the run: no lock held by anybody (a departed waiter's grant released), every put readable.
    for (const key of KEYS) {
      const third = vaultC.lock(key, 5);
      const answered = await Promise.race([third.then(() => true), sleep(HANG_GUARD_MS).then(() => false)]);
      if (!answered || (await third)?.variant !== "Done") failures.add(`vault: after the run ${key} is still held (seed ${options.seed})`);
      else await vaultC.unlock(key);
    }
    for (const [key, value] of puts) {
      for (const container of containers) {
        const got = await call(container.port, "GET", `/vault/${key}`).done;
        if (got === "left" || got.status !== 200 || got.text !== value) failures.add(`vault: GET ${key} through ${container.name}: ${JSON.stringify(got)}, expected ${value}`);
        else counts.readBack!++;
      }
    }
  } catch (error) {
    failures.add(`vault: ${(error as Error).stack ?? String(error)}`);
  } finally {
    rss = sampler.stop(options.rssFactor ?? 2, failures);
    await runCleanups(cleanups, failures);
  }
  return { scenario: "vault", rounds, seconds: Math.round((performance.now() - started) / 100) / 10, counts, rss, failures: failures.list };
}

// ---------------------------------------------------------------------------------------------------
// command

/** Every process whose process group is `pgid`. */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid pgrp ...: comm may hold spaces, so read after its closing parenthesis.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid && fields[0] !== "Z") members.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

function pgidOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
  } catch {
    return undefined;
  }
}

/** The program's POST /command, its lines counted; `leave()` is the program going away. */
function postCommand(port: number) {
  const state = { lines: 0, first: undefined as Record<string, unknown> | undefined, last: undefined as Record<string, unknown> | undefined, ended: false };
  let buffered = "";
  const req = httpRequest({ host: "127.0.0.1", port, path: "/command", method: "POST", agent: false }, (res) => {
    res.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("latin1");
      let at: number;
      while ((at = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, at);
        buffered = buffered.slice(at + 1);
        state.lines++;
        if (state.lines === 1) state.first = JSON.parse(line) as Record<string, unknown>;
        else if (line.startsWith('{"end"') || line.startsWith('{"error"')) state.last = JSON.parse(line) as Record<string, unknown>;
      }
    });
    res.on("end", () => (state.ended = true));
    res.on("error", () => (state.ended = true));
  });
  req.on("error", () => (state.ended = true));
  req.end("");
  return { state, leave: () => req.destroy() };
}

async function commandScenario(options: FamilySoakOptions, share: number): Promise<ScenarioReport> {
  const failures = new Failures();
  const rng = random(options.seed ^ 0xc0a4d);
  const counts: Record<string, number> = { commands: 0, programLeft: 0, providerStopped: 0, notServedRetries: 0, linesRead: 0, groupsChecked: 0, survivors: 0 };
  const started = performance.now();
  const cleanups: (() => Promise<unknown>)[] = [];
  const sampler = new RssSampler();
  let rss: Record<string, RssFigures> = {};
  const dir = tempDir("diverge-soak-command-");
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  let rounds = 0;
  try {
    // The command: a grandchild that would outlive it, then lines as fast as the pipe takes them.
    const executable = join(dir, "flood.sh");
    writeFileSync(executable, `#!/bin/sh\nsleep 1000 &\necho "$$ $!"\nexec yes "soak line from $$"\n`);
    chmodSync(executable, 0o755);
    const proxy = await proxyProcess(["--app-port", "9", "--root", dir]);
    cleanups.push(() => proxy.stop());
    const clientCli = join(packageDir("@diverge/client"), "dist", "cli.js");
    let provider: ChildProcess | undefined;
    let providerLog = "";
    const startProvider = () => {
      provider = spawn(process.execPath, [clientCli, "answer", "--proxy", proxy.url, "--command-exec", executable, "--vault-dir", join(dir, "vault")], { stdio: ["ignore", "ignore", "pipe"] });
      provider.stderr!.on("data", (chunk: Buffer) => (providerLog = (providerLog + chunk.toString()).slice(-4000)));
    };
    startProvider();
    cleanups.push(() => (provider ? stopChild(provider, "SIGKILL") : Promise.resolve()));
    sampler.watch("proxy", () => proxy.child.pid);
    sampler.watch("provider (diverge answer)", () => provider?.pid);
    const groups: number[] = [];

    for (; moreRounds(options, rounds, started, share); rounds++) {
      const fate = rng() < 0.6 ? "programLeft" : "providerStopped";
      const readLines = 1 + Math.floor(rng() * 5000);
      // The next command runs (asked again while the provider is not yet holding /requests).
      let program = postCommand(proxy.programPort);
      const running = await until(() => {
        if (program.state.ended && program.state.first?.end === "notServed") {
          counts.notServedRetries!++;
          program = postCommand(proxy.programPort);
        }
        return program.state.first?.item !== undefined || (program.state.ended && program.state.first?.end !== "notServed");
      });
      if (!running || program.state.first?.item === undefined) {
        failures.add(`command: round ${rounds}: the command did not run (${JSON.stringify(program.state)}; provider: ${providerLog.slice(-400)})`);
        program.leave();
        break;
      }
      counts.commands!++;
      const [shell, grandchild] = Buffer.from(program.state.first.item as string, "base64").toString().split(" ").map(Number) as [number, number];
      const pgid = pgidOf(shell);
      if (pgid !== shell) failures.add(`command: the command's shell ${shell} is in group ${pgid}, not its own`);
      if (pgidOf(grandchild) !== shell) failures.add(`command: the grandchild ${grandchild} is not in the command's group`);
      groups.push(shell);
      // Mid-stream: after some lines.
      await until(() => program.state.lines >= readLines || program.state.ended);
      counts.linesRead! += program.state.lines;
      if (program.state.ended) failures.add(`command: round ${rounds}: the stream ended by itself (${JSON.stringify(program.state.last)})`);
      if (fate === "programLeft") program.leave();
      else {
        const stopping = provider!;
        await stopChild(stopping, "SIGTERM");
        if (stopping.exitCode !== 0) failures.add(`command: diverge answer exited ${stopping.exitCode ?? stopping.signalCode} on SIGTERM`);
        program.leave();
      }
      counts[fate]!++;
      // No process of the command's group survives it.
      counts.groupsChecked!++;
      if (!(await until(() => groupMembers(shell).length === 0))) {
        counts.survivors!++;
        failures.add(`command: round ${rounds} (${fate}): processes ${groupMembers(shell).join(", ")} of group ${shell} survive (seed ${options.seed})`);
      }
      if (fate === "providerStopped") startProvider();
    }
    // Every group of the run is empty at its end.
    for (const group of groups) if (groupMembers(group).length > 0) failures.add(`command: group ${group} has processes after the run`);
  } catch (error) {
    failures.add(`command: ${(error as Error).stack ?? String(error)}`);
  } finally {
    rss = sampler.stop(options.rssFactor ?? 2, failures);
    await runCleanups(cleanups, failures);
  }
  return { scenario: "command", rounds, seconds: Math.round((performance.now() - started) / 100) / 10, counts, rss, failures: failures.list };
}

// ---------------------------------------------------------------------------------------------------
// write

/** The content of `file` at `version`: `size` bytes any prefix of which differs from every other version. */
function content(file: string, version: number, size: number): Buffer {
  const head = Buffer.from(`${file} v${version} ${size}\n`);
  const body = Buffer.alloc(Math.max(0, size - head.length), `${file}:${version};`);
  return Buffer.concat([head, body]).subarray(0, Math.max(size, head.length));
}

async function writeScenario(options: FamilySoakOptions, share: number): Promise<ScenarioReport> {
  const failures = new Failures();
  const rng = random(options.seed ^ 0x3717e);
  const counts: Record<string, number> = { whole: 0, sourceFailed: 0, writerAborted: 0, proxyStopped: 0, connectionCut: 0, laterWriteOk: 0, oldKept: 0, newWhole: 0, bytesSent: 0 };
  const started = performance.now();
  const cleanups: (() => Promise<unknown>)[] = [];
  const sampler = new RssSampler();
  let rss: Record<string, RssFigures> = {};
  const root = tempDir("diverge-soak-write-");
  cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
  let rounds = 0;
  try {
    // `/` is one connection per proxy life: a cut one is followed by a restarted proxy (same root).
    let proxy = await proxyProcess(["--app-port", "9", "--root", root]);
    cleanups.push(() => proxy.stop());
    let mux: MultiplexedConnection = await openContainer(proxy.url);
    cleanups.push(() => mux.close());
    let paths = filesystemPaths(proxy.url);
    let cutting: Promise<void> | undefined;
    let inflight = 0;
    let proxyGeneration = 0;
    const damaged = new Set<number>();
    const stoppedGenerations = new Set<number>();
    sampler.watch("proxy", () => proxy.child.pid);
    sampler.watch("provider (this process)", () => process.pid);
    const FILES = ["f0", "f1", "f2", "f3"];
    const current = new Map<string, Buffer>();
    for (const file of FILES) {
      const first = content(file, 0, 1000);
      writeFileSync(join(root, file), first);
      current.set(file, first);
    }
    let version = 1;
    const allowed = new Set(FILES);

    const oneWrite = async (file: string, writeRng: () => number, mustSucceed: boolean): Promise<boolean> => {
      const transport = writeRng() < 0.5 ? "multiplexed" : "paths";
      // proxyStopped: the proxy gets SIGTERM mid-content (a graceful stop; it is started again after).
      const fates = ["whole", "sourceFailed", "writerAborted", "proxyStopped", ...(transport === "multiplexed" ? ["connectionCut"] : [])] as const;
      const fate = mustSucceed ? "whole" : fates[Math.floor(writeRng() * fates.length)]!;
      // Up to 3 MiB: more than one message of the proxy's (1 MiB by default) now and then.
      const size = 1 + Math.floor(writeRng() * 3 * 2 ** 20);
      const next = content(file, version++, size);
      const giveUpAt = Math.floor(writeRng() * next.length * 0.9);
      const abort = new AbortController();
      while (cutting) await cutting;
      inflight++;
      const generation = proxyGeneration;
      const connection = mux;
      const pathsApi = paths;
      const PIECE = 64 * 1024;
      async function* source(): AsyncGenerator<Uint8Array> {
        for (let at = 0; at < next.length; at += PIECE) {
          if (fate !== "whole" && at >= giveUpAt) {
            if (fate === "sourceFailed") throw new Error("the soak's source gave up");
            if (fate === "writerAborted") abort.abort(new Error("the soak gave up"));
            if (fate === "connectionCut" && !damaged.has(generation)) {
              damaged.add(generation);
              (connection.frames.socket as unknown as { terminate(): void }).terminate();
            }
            if (fate === "proxyStopped" && !damaged.has(generation)) {
              damaged.add(generation);
              stoppedGenerations.add(generation);
              proxy.child.kill("SIGTERM");
            }
            // Hold the write open until the give-up reaches it.
            await sleep(50);
          }
          const piece = next.subarray(at, Math.min(next.length, at + PIECE));
          counts.bytesSent! += piece.length;
          yield piece;
        }
      }
      const api = transport === "multiplexed" ? connection : pathsApi;
      let outcome: string;
      debug(`write ${file} ${transport} ${fate} ${size} give up at ${giveUpAt}`);
      try {
        await api.write([file], source(), { signal: abort.signal });
        outcome = "ok";
      } catch (error) {
        outcome = (error as Error).message;
      }
      inflight--;
      debug(`write ${file} ${transport} ${fate}: ${outcome}`);
      // A write on a proxy or connection another write cut or stopped meanwhile is given up with it.
      const cutMeanwhile = damaged.has(generation) && fate !== "connectionCut" && fate !== "proxyStopped";
      if (cutMeanwhile) counts.givenUpWithAnother = (counts.givenUpWithAnother ?? 0) + 1;
      const effective = cutMeanwhile ? "givenUpWithAnother" : fate;
      if (generation === proxyGeneration && damaged.has(generation)) {
        // The cut connection's writes have ended; the next proxy serves the same root. One restart per cut.
        cutting ??= (async () => {
          // The proxy stays until every write in flight on it has ended (none starts meanwhile), and what
          // the cut left under the root is checked before it stops.
          await until(() => inflight === 0, HANG_GUARD_MS);
          const how = stoppedGenerations.has(proxyGeneration) ? "the proxy stopped (SIGTERM) mid-write" : "a connection cut mid-write";
          if (stoppedGenerations.has(proxyGeneration)) await until(() => proxy.child.exitCode !== null || proxy.child.signalCode !== null);
          if (!(await until(() => readdirSync(root).every((name) => allowed.has(name)), 10_000))) {
            counts.temporariesLeft = (counts.temporariesLeft ?? 0) + readdirSync(root).filter((name) => !allowed.has(name)).length;
            failures.add(`write: after ${how}, ${readdirSync(root).filter((name) => !allowed.has(name)).join(", ")} left under the root (seed ${options.seed})`);
            // Cleared, so the next give-up is checked on its own.
            for (const name of readdirSync(root)) if (!allowed.has(name)) rmSync(join(root, name), { force: true });
          }
          proxyGeneration++;
          debug("write: restarting the proxy");
          await proxy.stop();
          proxy = await proxyProcess(["--app-port", "9", "--root", root]);
          cleanups.push(() => proxy.stop());
          const fresh = await openContainer(proxy.url);
          cleanups.push(() => fresh.close());
          mux = fresh;
          paths = filesystemPaths(proxy.url);
          counts.proxyRestarts = (counts.proxyRestarts ?? 0) + 1;
          debug("write: restarted");
        })().finally(() => (cutting = undefined));
      }
      while (cutting) await cutting;
      counts[fate]!++;
      const old = current.get(file)!;
      if (effective === "whole" && outcome !== "ok") failures.add(`write: a whole write of ${file} over ${transport} failed: ${outcome}`);
      // Old or new whole, never partial; no temporary left beside it.
      const settled = await until(() => readdirSync(root).every((name) => allowed.has(name)), 10_000);
      if (!settled) failures.add(`write: after a ${fate} write over ${transport}, ${readdirSync(root).filter((name) => !allowed.has(name)).join(", ")} left under the root (seed ${options.seed})`);
      const now = readFileSync(join(root, file));
      if (now.equals(next)) {
        counts.newWhole!++;
        current.set(file, next);
        if (effective !== "whole" && effective !== "givenUpWithAnother" && outcome !== "ok") failures.add(`write: a ${fate} write over ${transport} failed (${outcome}) yet replaced ${file}`);
      } else if (now.equals(old)) {
        if (effective === "whole") failures.add(`write: a whole write of ${file} over ${transport} left the old file`);
        else counts.oldKept!++;
      } else failures.add(`write: ${file} is neither its old content (${old.length} bytes) nor the new (${next.length}) after a ${fate} write over ${transport}: ${now.length} bytes (seed ${options.seed})`);
      return effective !== "whole";
    };

    for (; moreRounds(options, rounds, started, share); rounds++) {
      // One writer per file at a time, the files written at once; after a give-up, that file's next
      // write is a whole one, and must succeed.
      await Promise.all(
        FILES.map(async (file) => {
          const writeRng = random(Math.floor(rng() * 2 ** 32));
          for (let step = 0; step < 4; step++) {
            let pending = await oneWrite(file, writeRng, false);
            // A later write succeeds (a whole one given up with another's cut is followed by one more).
            for (let again = 0; pending && again < 5; again++) {
              pending = await oneWrite(file, writeRng, true);
              if (!pending) counts.laterWriteOk!++;
            }
            if (pending) failures.add(`write: no later write of ${file} succeeded after a give-up (seed ${options.seed})`);
          }
        }),
      );
    }
  } catch (error) {
    failures.add(`write: ${(error as Error).stack ?? String(error)}`);
  } finally {
    rss = sampler.stop(options.rssFactor ?? 2, failures);
    await runCleanups(cleanups, failures);
  }
  return { scenario: "write", rounds, seconds: Math.round((performance.now() - started) / 100) / 10, counts, rss, failures: failures.list };
}

// ---------------------------------------------------------------------------------------------------
// fuse

/** A command in a child process (its output, and its exit status); the hang guard kills it. */
function run(command: string, args: readonly string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: "utf8", timeout: HANG_GUARD_MS, killSignal: "SIGKILL" }, (error, stdout, stderr) => resolve({ status: error ? ((error as { code?: number }).code ?? -1) : 0, stdout, stderr }));
  });
}

/** A program working in the mount: a shell loop of stat, ls, cat and a write, until one fails. */
function fuseProgram(at: string, index: number): { child: ChildProcess; iterations: () => number; output: () => string; ended: Promise<void> } {
  const script = `i=0; while :; do stat ${at}/sub >/dev/null && ls ${at} >/dev/null && cat ${at}/sub/f${index % 3} >/dev/null && echo $i > ${at}/w${index} || exit 3; i=$((i+1)); echo tick; done`;
  const child = spawn("sh", ["-c", script], { stdio: ["ignore", "pipe", "pipe"] });
  let ticks = 0;
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (ticks += chunk.toString().split("tick").length - 1));
  child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-1000)));
  const ended = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return { child, iterations: () => ticks, output: () => output, ended };
}

async function fuseScenario(options: FamilySoakOptions, share: number): Promise<ScenarioReport> {
  const unavailable = fuseUnavailable();
  if (unavailable) return { scenario: "fuse", skipped: unavailable, rounds: 0, seconds: 0, counts: {}, rss: {}, failures: [] };
  const failures = new Failures();
  const rng = random(options.seed ^ 0xf05e);
  const counts: Record<string, number> = { mounts: 0, multiplexed: 0, paths: 0, programs: 0, programIterations: 0, endedEIO: 0, endedENOTCONN: 0, endedOther: 0, remounted: 0 };
  const endMs: number[] = [];
  const started = performance.now();
  const cleanups: (() => Promise<unknown>)[] = [];
  const sampler = new RssSampler();
  let rss: Record<string, RssFigures> = {};
  const base = tempDir("diverge-soak-fuse-");
  const root = join(base, "container");
  mkdirSync(root);
  cleanups.push(async () => rmSync(base, { recursive: true, force: true }));
  let rounds = 0;
  const at = join(root, "m");
  try {
    let proxy = await proxyProcess(["--app-port", "9", "--root", root]);
    cleanups.push(async () => {
      await proxy.stop();
      // A mount the proxy left behind is not left for the next run.
      if (existsSync(at) && (await isMountPoint(at))) spawnSync("fusermount", ["-uz", at]);
    });
    sampler.watch("proxy", () => proxy.child.pid);
    sampler.watch("provider (this process)", () => process.pid);
    let transport: "multiplexed" | "paths" = "multiplexed";
    let gone: (() => Promise<void>) | undefined;
    /** The provider's directory for round `round`, mounted at /m on `transport`. */
    const mount = async (round: number): Promise<void> => {
      const served = join(base, `provider-${round}`);
      mkdirSync(join(served, "sub"), { recursive: true });
      for (let i = 0; i < 3; i++) writeFileSync(join(served, "sub", `f${i}`), `round ${round} file ${i}\n`.repeat(200));
      if (transport === "multiplexed") {
        const connection = await openContainer(proxy.url);
        await connection.mount(["m"], served);
        const abrupt = rng() < 0.5;
        gone = async () => {
          if (abrupt) (connection.frames.socket as unknown as { terminate(): void }).terminate();
          else await connection.close();
        };
        cleanups.push(() => connection.close());
      } else {
        const mounts = new PathsMounts(proxy.url);
        const answering: PathsConnection = connectProxy(proxy.url, { ...mounts.handlers() }, { minBackoffMs: 10, maxBackoffMs: 50 });
        await answering.whenConnected({ timeoutMs: 20_000 });
        await mounts.mount(["m"], served);
        gone = () => answering.close();
        cleanups.push(() => answering.close());
      }
      counts.mounts!++;
      counts[transport]!++;
    };

    for (; moreRounds(options, rounds, started, share); rounds++) {
      // The mount of this round, at the same path as every other round's.
      transport = rng() < 0.5 ? "multiplexed" : "paths";
      try {
        await mount(rounds);
      } catch (error) {
        failures.add(`fuse: round ${rounds}: a new mount at /m over ${transport} failed after the last round's provider left: ${(error as Error).message} (seed ${options.seed})`);
        // Recorded; the soak goes on with a restarted proxy (same root), whose mount must then work.
        await proxy.stop();
        proxy = await proxyProcess(["--app-port", "9", "--root", root]);
        counts.proxyRestarts = (counts.proxyRestarts ?? 0) + 1;
        try {
          await mount(rounds);
        } catch (again) {
          failures.add(`fuse: round ${rounds}: a mount at /m over ${transport} failed on a restarted proxy: ${(again as Error).message} (seed ${options.seed})`);
          break;
        }
      }
      if (rounds > 0) counts.remounted!++;
      debug(`fuse: round ${rounds} mounted over ${transport}`);
      const expected = `round ${rounds} file 0\n`.repeat(200);
      // In a child process, asynchronously: the provider answering it lives in this process.
      const read = await run("cat", [join(at, "sub", "f0")]);
      if (read.stdout !== expected) failures.add(`fuse: round ${rounds}: the mount does not serve this round's provider (${JSON.stringify(read.stdout.slice(0, 40))}, ${read.stderr.trim()})`);
      // Programs working in it.
      const n = 2 + Math.floor(rng() * 3);
      const programs = Array.from({ length: n }, (_, i) => fuseProgram(at, i));
      counts.programs! += n;
      await until(() => programs.every((p) => p.iterations() >= 3 || p.child.exitCode !== null));
      for (const p of programs) if (p.child.exitCode !== null) failures.add(`fuse: round ${rounds}: a program ended before its provider left: ${p.output()}`);
      // Mid-operation: after a seeded number of the first program's iterations.
      const more = programs[0]!.iterations() + Math.floor(rng() * 20);
      await until(() => programs[0]!.iterations() >= more || programs[0]!.child.exitCode !== null);
      const leftAt = performance.now();
      debug(`fuse: round ${rounds}: the provider leaves`);
      await gone!();
      debug(`fuse: round ${rounds}: the provider left`);
      // Every program's operations end (the hang guard is a bound, not a timing).
      for (const p of programs) {
        const ended = await Promise.race([p.ended.then(() => true), sleep(HANG_GUARD_MS).then(() => false)]);
        counts.programIterations! += p.iterations();
        if (!ended) {
          failures.add(`fuse: round ${rounds} (${transport}): a program in the mount still runs ${HANG_GUARD_MS} ms after its provider left (seed ${options.seed})`);
          p.child.kill("SIGKILL");
          continue;
        }
        endMs.push(performance.now() - leftAt);
        const said = p.output();
        if (/Input\/output error/.test(said)) counts.endedEIO!++;
        else if (/not connected/.test(said)) counts.endedENOTCONN!++;
        else counts.endedOther!++;
      }
      // The mount: gone (multiplexed), or failing with EIO (paths).
      if (transport === "multiplexed") {
        if (!(await until(async () => !(await isMountPoint(at)), HANG_GUARD_MS))) failures.add(`fuse: round ${rounds}: the multiplexed mount stays after its connection ended`);
        // `/` is one connection per proxy life: the next round meets a restarted proxy (same root).
        await proxy.stop();
        proxy = await proxyProcess(["--app-port", "9", "--root", root]);
        counts.proxyRestarts = (counts.proxyRestarts ?? 0) + 1;
      } else {
        // A listing is always asked (a directory's open is never cached); a stat may be answered
        // from the kernel's attribute cache for up to its 1 s (close-to-open), so it is no probe.
        const probe = await run("ls", [join(at, "sub")]);
        if (probe.status === 0 || !/Input\/output error|not connected|No such file/.test(probe.stderr)) failures.add(`fuse: round ${rounds}: ls in the paths mount whose provider left: ${probe.status} ${probe.stderr.trim()}`);
      }
    }
  } catch (error) {
    failures.add(`fuse: ${(error as Error).stack ?? String(error)}`);
  } finally {
    rss = sampler.stop(options.rssFactor ?? 2, failures);
    await runCleanups(cleanups, failures);
  }
  if (endMs.length > 0) {
    counts.endMsMedian = Math.round(median(endMs));
    counts.endMsMax = Math.round(Math.max(...endMs));
  }
  return { scenario: "fuse", rounds, seconds: Math.round((performance.now() - started) / 100) / 10, counts, rss, failures: failures.list };
}

// ---------------------------------------------------------------------------------------------------

const RUNNERS: Record<FamilyScenario, (options: FamilySoakOptions, share: number) => Promise<ScenarioReport>> = {
  vault: vaultScenario,
  command: commandScenario,
  write: writeScenario,
  fuse: fuseScenario,
};

/** Runs one scenario of the families soak. */
export function runFamilyScenario(scenario: FamilyScenario, options: FamilySoakOptions): Promise<ScenarioReport> {
  return RUNNERS[scenario](options, options.seconds ?? 0);
}

/** Runs the scenarios one after another, `seconds` shared between them. */
export async function runFamilySoak(options: FamilySoakOptions): Promise<FamilySoakReport> {
  const scenarios = options.scenarios ?? FAMILY_SCENARIOS;
  const share = (options.seconds ?? 0) / scenarios.length;
  const reports: ScenarioReport[] = [];
  for (const scenario of scenarios) {
    options.log?.(`families soak: ${scenario} (seed ${options.seed})`);
    const report = await RUNNERS[scenario](options, share);
    options.log?.(`families soak: ${scenario}: ${report.skipped ? `skipped (${report.skipped})` : `${report.rounds} rounds in ${report.seconds} s, ${report.failures.length} failures`}`);
    reports.push(report);
  }
  return { seed: options.seed, scenarios: reports, failures: reports.flatMap((report) => report.failures) };
}
