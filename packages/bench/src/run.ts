// Runs the suites and judges each target. The CLI (bench.ts) and the CI test both call `runBench`.
import { fork } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fixedFrames, jsonFrames, protobufPeer } from "./cases/codec.js";
import { generation, type GenerationResult } from "./cases/generation.js";
import { machine, type Machine } from "./machine.js";
import { setProfileLabel } from "./processes.js";
import { FULL_TIMING, QUICK_TIMING, sunk, type GroupResult, type Timing } from "./measure.js";

export const SUITES = ["fixed", "json", "protobuf", "relay", "memory", "generation", "startup", "parity", "vault", "filesystem", "agents", "pgwire", "fuse"] as const;
export type Suite = (typeof SUITES)[number];

/** The numbering of the cases. */
export const CASE_OF: Record<Suite, number> = { fixed: 1, json: 2, protobuf: 3, relay: 4, memory: 5, generation: 6, startup: 7, parity: 8, vault: 9, filesystem: 10, agents: 11, pgwire: 12, fuse: 13 };

export interface BenchOptions {
  readonly quick: boolean;
  readonly repoRoot: string;
  readonly suites?: readonly Suite[];
  readonly log?: (line: string) => void;
}

export interface SuiteGroup extends GroupResult {
  readonly suite: Suite;
}

export interface Target {
  readonly case: number;
  readonly what: string;
  readonly goal: string;
  /** The measured value, as text. */
  readonly value: string;
  /** true met, false missed, null reported only (no target). */
  readonly met: boolean | null;
  readonly note?: string;
}

export interface SuiteOutcome {
  readonly suite: Suite;
  readonly ran: boolean;
  /** Why a suite did not run or failed. */
  readonly reason?: string;
  readonly seconds: number;
}

export interface Results {
  readonly version: 1;
  readonly quick: boolean;
  readonly machine: Machine;
  readonly timing: Timing;
  readonly suites: readonly SuiteOutcome[];
  readonly groups: readonly SuiteGroup[];
  readonly generation?: GenerationResult;
  readonly parity?: unknown;
  readonly relay?: unknown;
  readonly memory?: unknown;
  readonly startup?: unknown;
  readonly vault?: unknown;
  readonly filesystem?: unknown;
  readonly agents?: unknown;
  readonly pgwire?: unknown;
  readonly fuse?: unknown;
  /** Suites run again after the main run, their numbers replacing its (why, when, the load then). */
  readonly reruns?: readonly { readonly suites: readonly Suite[]; readonly date: string; readonly loadAverage: readonly number[]; readonly reason: string }[];
  /** Tables of the relay, memory and start-up suites. */
  readonly tables: readonly Table[];
  readonly targets: readonly Target[];
}

/** A table of results for the printed and the Markdown report. */
export interface Table {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly string[])[];
  readonly notes?: readonly string[];
}

/** What the relay and memory suites hand back. */
export interface SuiteReport {
  readonly result: unknown;
  readonly tables: readonly Table[];
  readonly targets: readonly Target[];
}

/** Optional suites that live in their own modules and may be missing their dependencies. */
export interface ExtraSuites {
  relay?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  memory?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  startup?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  parity?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  vault?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  filesystem?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  agents?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  pgwire?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
  fuse?: (quick: boolean, log: (line: string) => void) => Promise<SuiteReport>;
}

const pct = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%`;
const times = (x: number) => `${x.toFixed(2)}×`;
const range = (r: readonly [number, number]) => `${r[0].toFixed(2)}–${r[1].toFixed(2)}`;

function judgeGroups(groups: readonly SuiteGroup[]): Target[] {
  const targets: Target[] = [];
  for (const g of groups) {
    const find = (name: string) => g.cases.find((c) => c.name === name);
    if (g.suite === "fixed") {
      // The limit is the faster of the two hand-written versions.
      const gen = find("generated")!;
      const dv = find("DataView")!;
      const shifts = find("hand-written shifts")!;
      const limit = shifts.opsPerSecond > dv.opsPerSecond ? shifts : dv;
      const ratio = gen.opsPerSecond / limit.opsPerSecond;
      targets.push({
        case: 1,
        what: g.group.replace(/^fixed: /, ""),
        goal: "≥ 0.80× hand-written (the faster of DataView and shifts)",
        value:
          `${times(ratio)} ${limit.name} (${times(gen.ratio)} DataView; median of rounds ${times(gen.medianRatio / limit.medianRatio)}` +
          (gen.processRatios && limit.processRatios
            ? `; per process ${gen.processRatios.map((r, i) => (r / limit.processRatios![i]!).toFixed(2)).join(", ")})`
            : ")"),
        met: ratio >= 0.8,
      });
    } else if (g.suite === "json") {
      const gen = find("generated")!;
      const overhead = 1 / gen.ratio - 1;
      targets.push({
        case: 2,
        what: g.group.replace(/^json: /, ""),
        goal: "codec overhead ≤ 10% (unchecked)",
        value:
          `${pct(overhead)} time (${times(gen.ratio)} throughput; median of rounds ${times(gen.medianRatio)}, range ${range(gen.ratioRange)}` +
          (gen.processRatios ? `; per process ${gen.processRatios.map((r) => r.toFixed(2)).join(", ")})` : ")"),
        met: overhead <= 0.1,
      });
      const checked = find("generated + checkMcp");
      if (checked) {
        targets.push({
          case: 2,
          what: `${g.group.replace(/^json: /, "")}: cost of checkMcp`,
          goal: "reported (make it cheap)",
          value: `${times(gen.opsPerSecond / checked.opsPerSecond)} the unchecked decode's time (${(checked.nsPerOp / 1000).toFixed(1)} µs vs ${(gen.nsPerOp / 1000).toFixed(1)} µs)`,
          met: null,
        });
      }
    } else if (g.suite === "protobuf") {
      const pb = find("protobuf-es")!;
      const isFixedDecode = /decode/.test(g.group) && !/call-tool/.test(g.group);
      targets.push({
        case: 3,
        what: g.group.replace(/^protobuf: /, ""),
        goal: isFixedDecode ? "ours faster than protobuf-es" : "reported",
        value: `ours ${times(1 / pb.ratio)} as fast as protobuf-es (median of rounds ${times(1 / pb.medianRatio)})`,
        met: isFixedDecode ? pb.ratio < 1 : null,
      });
    }
  }
  return targets;
}

/**
 * Fresh processes the codec suites run in, in full mode; each group's numbers are their median. At
 * least 7: one slow process (the JIT's placement of a 12 ns loop) then cannot flip a fixed-frame row.
 */
export const CODEC_PROCESSES = 7;

function codecProcess(suites: readonly Suite[], timing: Timing): Promise<{ suite: Suite; groups: GroupResult[] }[]> {
  const script = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "codec-child.js");
  return new Promise((resolve, reject) => {
    const child = fork(script, [suites.join(","), JSON.stringify(timing)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    let answered = false;
    child.once("message", (m: { suite: Suite; groups: GroupResult[] }[]) => {
      answered = true;
      resolve(m);
    });
    child.once("exit", (code) => {
      if (!answered) reject(new Error(`the codec benchmark process exited with ${code}`));
    });
  });
}

/**
 * One group per comparison: each case's throughput, ratio and median ratio are the medians over the
 * processes, the range spans every round of every process, and `processRatios` keeps each process's.
 */
function mergeProcesses(runs: readonly { suite: Suite; groups: GroupResult[] }[][]): SuiteGroup[] {
  const out: SuiteGroup[] = [];
  const first = runs[0]!;
  first.forEach((suiteRun, si) => {
    suiteRun.groups.forEach((g, gi) => {
      const all = runs.map((r) => r[si]!.groups[gi]!);
      out.push({
        suite: suiteRun.suite,
        group: g.group,
        baseline: g.baseline,
        cases: g.cases.map((c, ci) => {
          const each = all.map((x) => x.cases[ci]!);
          const opsPerSecond = median(each.map((e) => e.opsPerSecond));
          return {
            name: c.name,
            opsPerSecond,
            medianOpsPerSecond: median(each.map((e) => e.medianOpsPerSecond)),
            nsPerOp: 1e9 / opsPerSecond,
            rme: median(each.map((e) => e.rme)),
            ratio: median(each.map((e) => e.ratio)),
            medianRatio: median(each.map((e) => e.medianRatio)),
            ratioRange: [Math.min(...each.map((e) => e.ratioRange[0])), Math.max(...each.map((e) => e.ratioRange[1]))] as const,
            processRatios: each.map((e) => e.ratio),
          };
        }),
      });
    });
  });
  return out;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export async function runBench(options: BenchOptions, extra: ExtraSuites = {}): Promise<Results> {
  const log = options.log ?? (() => {});
  const timing = options.quick ? QUICK_TIMING : FULL_TIMING;
  const wanted = new Set(options.suites ?? SUITES);
  const info = machine();
  const suites: SuiteOutcome[] = [];
  const groups: SuiteGroup[] = [];
  const targets: Target[] = [];
  let generationResult: GenerationResult | undefined;
  let relay: unknown;
  let memory: unknown;
  let startup: unknown;
  const tables: Table[] = [];

  const codec: [Suite, (t: Timing) => Promise<GroupResult[]>][] = [
    ["fixed", fixedFrames],
    ["json", jsonFrames],
    ["protobuf", protobufPeer],
  ];
  const codecWanted = codec.filter(([suite]) => wanted.has(suite));
  if (options.quick || codecWanted.length === 0) {
    for (const [suite, run] of codecWanted) {
      const start = performance.now();
      log(`case ${CASE_OF[suite]} (${suite}) …`);
      const result = await run(timing);
      for (const g of result) groups.push({ suite, ...g });
      suites.push({ suite, ran: true, seconds: (performance.now() - start) / 1000 });
    }
  } else {
    const start = performance.now();
    const runs: { suite: Suite; groups: GroupResult[] }[][] = [];
    for (let p = 0; p < CODEC_PROCESSES; p++) {
      log(`cases 1–3 (${codecWanted.map(([s]) => s).join(", ")}), process ${p + 1} of ${CODEC_PROCESSES} …`);
      runs.push(await codecProcess(codecWanted.map(([s]) => s), timing));
    }
    groups.push(...mergeProcesses(runs));
    for (const [suite] of codecWanted) suites.push({ suite, ran: true, seconds: (performance.now() - start) / 1000 / codecWanted.length });
  }
  targets.push(...judgeGroups(groups));

  let parity: unknown;
  let vault: unknown;
  let filesystem: unknown;
  let agents: unknown;
  let pgwire: unknown;
  let fuse: unknown;
  for (const suite of ["relay", "memory", "startup", "parity", "vault", "filesystem", "agents", "pgwire", "fuse"] as const) {
    if (!wanted.has(suite)) continue;
    const start = performance.now();
    const run = extra[suite];
    if (!run) {
      suites.push({ suite, ran: false, reason: "not available in this build", seconds: 0 });
      continue;
    }
    log(`case ${CASE_OF[suite]} (${suite}) …`);
    setProfileLabel(suite);
    try {
      const out = await run(options.quick, log);
      if (suite === "relay") relay = out.result;
      else if (suite === "memory") memory = out.result;
      else if (suite === "parity") parity = out.result;
      else if (suite === "vault") vault = out.result;
      else if (suite === "filesystem") filesystem = out.result;
      else if (suite === "agents") agents = out.result;
      else if (suite === "pgwire") pgwire = out.result;
      else if (suite === "fuse") fuse = out.result;
      else startup = out.result;
      targets.push(...out.targets);
      tables.push(...out.tables);
      suites.push({ suite, ran: true, seconds: (performance.now() - start) / 1000 });
    } catch (problem) {
      const reason = problem instanceof Error ? problem.message : String(problem);
      log(`case ${CASE_OF[suite]} (${suite}) failed: ${reason}`);
      suites.push({ suite, ran: false, reason, seconds: (performance.now() - start) / 1000 });
    }
  }

  if (wanted.has("generation")) {
    const start = performance.now();
    log("case 6 (generation) …");
    const g = options.quick ? generation(options.repoRoot, "2.3.0", 1, 2, false) : generation(options.repoRoot, "2.3.0", 3, 10, true);
    generationResult = g;
    const copies = options.quick ? 2 : 10;
    // Linear means the tenfold spec takes at most ten times as long; allow a quarter for noise.
    targets.push({
      case: 6,
      what: `generateAll, ${g.runs[1]!.spec} vs ${g.runs[0]!.spec}`,
      goal: `grows linearly (≤ ${copies * 1.25}× for ${copies}× the spec)`,
      value: `${times(g.growth)} the time, fastest runs (${g.runs[0]!.bestMs.toFixed(0)} ms → ${g.runs[1]!.bestMs.toFixed(0)} ms; medians ${g.runs[0]!.medianMs.toFixed(0)} → ${g.runs[1]!.medianMs.toFixed(0)} ms, ${times(g.medianGrowth)}) for ${times(g.runs[1]!.bytes / g.runs[0]!.bytes)} the output`,
      met: g.growth <= copies * 1.25,
    });
    suites.push({ suite: "generation", ran: true, seconds: (performance.now() - start) / 1000 });
  }
  // Keep the sink observable so no measured work is ever dead code.
  if (sunk() === 0.5) log("");
  return { version: 1, quick: options.quick, machine: info, timing, suites, groups, generation: generationResult, relay, memory, startup, parity, vault, filesystem, agents, pgwire, fuse, tables, targets };
}
