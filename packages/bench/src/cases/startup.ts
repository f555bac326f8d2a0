// Case 7: the proxy's footprint in every container — the time from starting `diverge-proxy` to its
// listening line, and its resident memory once listening with nobody connected, each against a bare
// Node process that starts and listens on a port, measured in the same rounds. Three forms of the
// proxy: the workspace build (`node packages/server/dist/cli.js`), the one-file bundle
// (`node diverge-proxy.mjs`, copied alone into an empty directory) and the single executable (where
// this machine can build one). The bundle and the executable are built by the server's own
// `scripts/bundle.mjs` into `packages/bench/.cache/bundle`, again whenever the server's build or that
// script is newer.
//
// Each round starts every form once, in an order reversed every other round, right after one another.
// A form's start-up ratio is the median over rounds of its time divided by bare Node's time in the
// same round: a start is one sample of ~50–150 ms, and on a shared machine one busy moment can slow
// any single start several-fold, so the pairs within a round and their median are steadier than a
// best round (which is shown beside it, with the CPU time each process had used when it printed its
// line: user + system from /proc, which waiting for the CPU does not inflate). Memory is the median
// over rounds of a form's RSS minus bare Node's RSS in the same round.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { SuiteReport, Target } from "../run.js";

const MB = 1024 * 1024;
/** The targets. */
export const START_RATIO_TARGET = 1.7;
export const RSS_OVER_BARE_TARGET = 15 * MB;

const benchDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const serverDir = dirname(createRequire(import.meta.url).resolve("@diverge/server/package.json"));
const cacheDir = join(benchDir, ".cache", "bundle");
const PROXY_ARGS = ["--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--quiet"];
/** Bare Node: starts, listens on a port, says so. */
const BARE = `require("node:http").createServer().listen(0, "127.0.0.1", () => process.stdout.write("listening\\n"))`;

interface Form {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd?: string;
}

export interface StartupSample {
  readonly ms: number;
  /** CPU time (user + system) the process had used at its listening line; NaN where /proc is missing. */
  readonly cpuMs: number;
  readonly rss: number;
}

export interface StartupResult {
  readonly rounds: number;
  readonly settleMs: number;
  readonly forms: readonly {
    readonly name: string;
    readonly samples: readonly StartupSample[];
    readonly medianMs: number;
    readonly bestMs: number;
    readonly medianCpuMs: number;
    readonly medianRss: number;
    /** Per round: this form's start-up time over bare Node's in the same round. */
    readonly startRatios: readonly number[];
    /** Per round: this form's RSS minus bare Node's in the same round, in bytes. */
    readonly rssOverBare: readonly number[];
  }[];
  /** Why the single executable was not measured, when it was not. */
  readonly seaMissing?: string;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** The bundle and, where it can be built, the single executable: built again when the server's build is newer. */
function bundles(log: (line: string) => void): { mjs: string; sea?: string; seaMissing?: string } {
  const entry = join(serverDir, "dist", "cli.js");
  const mjs = join(cacheDir, "diverge-proxy.mjs");
  const sea = join(cacheDir, process.platform === "win32" ? "diverge-proxy.exe" : "diverge-proxy");
  const script = join(serverDir, "scripts", "bundle.mjs");
  const newest = Math.max(statSync(entry).mtimeMs, statSync(script).mtimeMs);
  const stale = (file: string) => !existsSync(file) || statSync(file).mtimeMs < newest;
  let output = "";
  if (stale(mjs) || stale(sea)) {
    log("  start-up: building the bundle and the single executable (packages/server/scripts/bundle.mjs)");
    mkdirSync(cacheDir, { recursive: true });
    const built = spawnSync(process.execPath, [script, "--out", cacheDir], { encoding: "utf8", timeout: 300_000 });
    output = `${built.stdout ?? ""}${built.stderr ?? ""}`;
    if (built.status !== 0) throw new Error(`the server's bundle.mjs failed: ${output.trim()}`);
  }
  if (existsSync(sea) && !stale(sea)) return { mjs, sea };
  return { mjs, seaMissing: /no single executable: (.*)/.exec(output)?.[1] ?? "not built" };
}

/** Starts `form`, resolves with the time to its listening line and its RSS `settleMs` later, then stops it. */
function measure(form: Form, settleMs: number): Promise<StartupSample> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now();
    // Nothing of the bench's environment (NODE_OPTIONS, …) reaches the measured process.
    const child = spawn(form.command, [...form.args], { cwd: form.cwd, env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let ms: number | undefined;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${form.name} did not say it was listening within 30 s: ${stderr}`));
    }, 30_000);
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (ms !== undefined || !stdout.includes("listening")) return;
      ms = performance.now() - started;
      const cpuMs = cpuOf(child.pid!);
      clearTimeout(timer);
      setTimeout(() => {
        let rss: number;
        try {
          rss = rssOf(child.pid!);
        } catch (problem) {
          child.kill("SIGKILL");
          return reject(problem);
        }
        child.once("exit", () => resolvePromise({ ms: ms!, cpuMs, rss }));
        child.kill("SIGTERM");
      }, settleMs);
    });
    child.once("error", (problem) => {
      clearTimeout(timer);
      reject(problem);
    });
    child.once("exit", (code) => {
      if (ms === undefined) {
        clearTimeout(timer);
        reject(new Error(`${form.name} exited with ${code} before listening: ${stderr}`));
      }
    });
  });
}

/** CPU time (user + system) a process has used, in ms, from /proc; NaN without it. */
function cpuOf(pid: number): number {
  try {
    // Fields 14 and 15 of /proc/<pid>/stat, counted after the parenthesised command name, in clock ticks (100 a second on Linux).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) / 100) * 1000;
  } catch {
    return NaN;
  }
}

/** Resident set size of a process, in bytes: /proc where there is one, else `ps`. */
function rssOf(pid: number): number {
  if (existsSync(`/proc/${pid}/status`)) {
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    if (kb) return Number(kb[1]) * 1024;
  }
  const ps = spawnSync("ps", ["-o", "rss=", "-p", String(pid)], { encoding: "utf8" });
  const kb = Number(ps.stdout.trim());
  if (!Number.isFinite(kb) || kb <= 0) throw new Error(`cannot read the RSS of process ${pid}`);
  return kb * 1024;
}

export async function startupSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const rounds = quick ? 2 : 21;
  const settleMs = quick ? 200 : 1000;
  const { mjs, sea, seaMissing } = bundles(log);
  // The bundle and the executable run alone in empty directories, as in an image.
  const alone: string[] = [];
  const copy = (file: string) => {
    const dir = mkdtempSync(join(tmpdir(), "diverge-bench-alone-"));
    alone.push(dir);
    const target = join(dir, file.split(/[\\/]/).pop()!);
    copyFileSync(file, target);
    return { dir, target };
  };
  const bundle = copy(mjs);
  const forms: Form[] = [
    { name: "bare Node listening on a port", command: process.execPath, args: ["-e", BARE] },
    { name: "workspace build (node dist/cli.js)", command: process.execPath, args: [join(serverDir, "dist", "cli.js"), ...PROXY_ARGS] },
    { name: "bundle (node diverge-proxy.mjs)", command: process.execPath, args: [bundle.target, ...PROXY_ARGS], cwd: bundle.dir },
  ];
  if (sea) {
    const binary = copy(sea);
    forms.push({ name: "single executable (diverge-proxy)", command: binary.target, args: PROXY_ARGS, cwd: binary.dir });
  }
  const samples = forms.map(() => [] as StartupSample[]);
  try {
    // One unmeasured start of each first: the page cache then holds every file of every form.
    for (const form of forms) await measure(form, 0);
    for (let round = 0; round < rounds; round++) {
      const order = forms.map((_, i) => i);
      if (round % 2 === 1) order.reverse();
      for (const i of order) samples[i]!.push(await measure(forms[i]!, settleMs));
    }
  } finally {
    for (const dir of alone) rmSync(dir, { recursive: true, force: true });
  }
  const bare = samples[0]!;
  const result: StartupResult = {
    rounds,
    settleMs,
    seaMissing,
    forms: forms.map((form, i) => ({
      name: form.name,
      samples: samples[i]!,
      medianMs: median(samples[i]!.map((s) => s.ms)),
      bestMs: Math.min(...samples[i]!.map((s) => s.ms)),
      medianCpuMs: median(samples[i]!.map((s) => s.cpuMs)),
      medianRss: median(samples[i]!.map((s) => s.rss)),
      startRatios: samples[i]!.map((s, r) => s.ms / bare[r]!.ms),
      rssOverBare: samples[i]!.map((s, r) => s.rss - bare[r]!.rss),
    })),
  };
  const targets: Target[] = [];
  const base = result.forms[0]!;
  const cpuRatio = (form: StartupResult["forms"][number]) => (Number.isFinite(form.medianCpuMs) && base.medianCpuMs > 0 ? `; CPU ${(form.medianCpuMs / base.medianCpuMs).toFixed(2)}×` : "");
  for (const form of result.forms.slice(1)) {
    const ratio = median(form.startRatios);
    const over = median(form.rssOverBare);
    targets.push({
      case: 7,
      what: `start to listening, ${form.name}`,
      goal: `≤ ${START_RATIO_TARGET}× bare Node's start-and-listen`,
      value: `${ratio.toFixed(2)}× (median of rounds; medians ${form.medianMs.toFixed(0)} ms vs ${base.medianMs.toFixed(0)} ms; best ${form.bestMs.toFixed(0)} ms vs ${base.bestMs.toFixed(0)} ms, ${(form.bestMs / base.bestMs).toFixed(2)}×${cpuRatio(form)})`,
      met: ratio <= START_RATIO_TARGET,
    });
    targets.push({
      case: 7,
      what: `idle RSS, ${form.name}`,
      goal: `≤ bare Node + ${RSS_OVER_BARE_TARGET / MB} MB`,
      value: `${over >= 0 ? "+" : "−"}${(Math.abs(over) / MB).toFixed(1)} MB (${(form.medianRss / MB).toFixed(1)} MB vs ${(base.medianRss / MB).toFixed(1)} MB)`,
      met: over <= RSS_OVER_BARE_TARGET,
    });
  }
  if (!sea) targets.push({ case: 7, what: "single executable (diverge-proxy)", goal: "measured where it can be built", value: `not measured: ${seaMissing}`, met: null });
  return {
    result,
    targets,
    tables: [
      {
        title: "Case 7: start-up and idle memory",
        columns: ["form", "start to listening (median; best)", "ratio to bare Node (median of rounds)", "best vs best", "range of rounds", "CPU at the line (median)", "idle RSS (median)", "over bare Node"],
        rows: result.forms.map((form, i) => [
          form.name,
          `${form.medianMs.toFixed(0)} ms; ${form.bestMs.toFixed(0)} ms`,
          i === 0 ? "1.00×" : `${median(form.startRatios).toFixed(2)}×`,
          `${(form.bestMs / base.bestMs).toFixed(2)}×`,
          i === 0 ? "—" : `${Math.min(...form.startRatios).toFixed(2)}–${Math.max(...form.startRatios).toFixed(2)}×`,
          Number.isFinite(form.medianCpuMs) ? `${form.medianCpuMs.toFixed(0)} ms` : "—",
          `${(form.medianRss / MB).toFixed(1)} MB`,
          i === 0 ? "—" : `${median(form.rssOverBare) >= 0 ? "+" : "−"}${(Math.abs(median(form.rssOverBare)) / MB).toFixed(1)} MB`,
        ]),
        notes: [
          `${rounds} rounds, each form started once per round in an order reversed every other round; RSS read ${settleMs} ms after the listening line, nobody connected. Start-up is from spawn to the listening line on stdout.`,
        ],
      },
    ],
  };
}
