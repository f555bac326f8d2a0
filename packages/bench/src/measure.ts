// How throughput is measured: tinybench, one process, the cases of a comparison side by side.
//
// Two things keep the ratios honest on a small, shared machine:
// - Each task runs its operation `batch` times per sample, so a sample of a 20 ns decode is not
//   mostly the cost of reading the clock. ops/s = batch × samples / total time.
// - The cases of one comparison run in many short interleaved rounds (A B C, C B A, …). Other
//   processes on the machine can only ever slow a round down, never speed it up, so each case's
//   throughput is its best round, and the ratio is best against best. The median of the per-round
//   ratios and their spread (min–max) are reported beside it: a wide spread says the machine was
//   busy, and a median far from the best-vs-best ratio says the ratio is not to be trusted.
import { Bench } from "tinybench";

/**
 * Where results of operations go: a ring the results are stored in, so the JIT can neither drop the
 * work as dead code nor, by escape analysis, skip allocating the decoded object (which a real caller
 * keeps) in some runs and not in others.
 */
const ring: unknown[] = new Array(1024).fill(undefined);
let sinkCount = 0;
export function sink(value: unknown): void {
  ring[sinkCount++ & 1023] = value;
}
export function sunk(): number {
  return sinkCount + ring.length;
}

export interface Case {
  /** Short name, unique within its group. */
  readonly name: string;
  /** One operation. */
  readonly run: () => unknown;
}

export interface Timing {
  /** Seconds of measuring per task per round. */
  readonly time: number;
  /** Interleaved rounds per group. */
  readonly rounds: number;
  /** Seconds of warm-up per task, once, before the first round. */
  readonly warmup: number;
}

export const FULL_TIMING: Timing = { time: 0.12, rounds: 15, warmup: 0.3 };
export const QUICK_TIMING: Timing = { time: 0.01, rounds: 1, warmup: 0.005 };

export interface CaseResult {
  readonly name: string;
  /** Operations per second: the best round's. */
  readonly opsPerSecond: number;
  /** Operations per second: the median round's. */
  readonly medianOpsPerSecond: number;
  /** Mean time of one operation in nanoseconds (1e9 / opsPerSecond). */
  readonly nsPerOp: number;
  /** Relative margin of error of the samples within a round (median over rounds), in percent. */
  readonly rme: number;
  /** This case's best throughput divided by the baseline's best. */
  readonly ratio: number;
  /** The median of the per-round ratios. */
  readonly medianRatio: number;
  /** Smallest and largest per-round ratio: how much the machine's noise moved it. */
  readonly ratioRange: readonly [number, number];
  /** When the group ran in several processes: each process's ratio (the others are their medians). */
  readonly processRatios?: readonly number[];
}

export interface GroupResult {
  readonly group: string;
  readonly baseline: string;
  readonly cases: readonly CaseResult[];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The loop that runs one case's operation `batch` times, one closure per case: one loop function
 * shared by every case would see every operation at its call site, go megamorphic, and stop inlining
 * the operation into the loop for some cases and not others, depending on the order they ran in
 * (measured: the same decoder at 0.65× or 0.91× of its baseline from one run to the next).
 *
 * The closures are not fully separate: V8 caches `new Function` by its source text, so loops made
 * from this one text share their function (case 1's 18 loops are 4 functions in `--trace-opt`).
 * Giving each loop a text of its own (a serial number in a comment), alone or with new loops every
 * round, was measured and not kept: the /requests ask header decode stayed as unsteady from process
 * to process (0.61–0.97 of the shift code, median 0.71 over 18 processes, against 0.66–0.95, median
 * 0.90 over 12 with the shared text) and the 1 MB JSON decode missed its target in three runs of three.
 */
function batchLoop(run: () => unknown, batch: number): () => void {
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const make = new Function("run", "ring", "batch", "return function batchLoop() { for (let k = 0; k < batch; k++) ring[k & 1023] = run(); };") as (
    run: () => unknown,
    ringArray: unknown[],
    batch: number,
  ) => () => void;
  return make(run, ring, batch);
}

/** How many operations one sample batches: enough for ~50 µs per sample, at least one. */
function calibrate(run: () => unknown): number {
  let n = 1;
  for (;;) {
    const start = performance.now();
    for (let i = 0; i < n; i++) sink(run());
    const elapsed = performance.now() - start;
    if (elapsed >= 0.05 || n >= 1 << 20) return Math.max(1, Math.round((n * 0.05) / Math.max(elapsed, 1e-6)));
    n *= 4;
  }
}

/**
 * Measures `cases` side by side. The first case is the baseline the ratios refer to.
 * Every case is checked to run once before any timing.
 */
export async function compare(group: string, cases: readonly Case[], timing: Timing): Promise<GroupResult> {
  if (cases.length === 0) throw new Error(`group ${group} has no cases`);
  for (const c of cases) sink(c.run());
  const batches = cases.map((c) => calibrate(c.run));
  const tasks = cases.map((c, i) => batchLoop(c.run, batches[i]!));
  // Warm up every case once so the first round is not the JIT's.
  {
    const bench = new Bench({ time: timing.warmup * 1000, iterations: 1, warmupTime: 0, warmupIterations: 0, throws: true });
    cases.forEach((c, i) => bench.add(c.name, tasks[i]!));
    await bench.run();
  }
  const perRound: { ops: number[]; rme: number[] }[] = cases.map(() => ({ ops: [], rme: [] }));
  const ratios: number[][] = cases.map(() => []);
  for (let round = 0; round < timing.rounds; round++) {
    const bench = new Bench({
      time: timing.time * 1000,
      iterations: 4,
      warmupTime: 0,
      warmupIterations: 0,
      throws: true,
    });
    // Alternate the order between rounds so neither side always runs right after the other.
    const order = cases.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) bench.add(cases[i]!.name, tasks[i]!);
    await bench.run();
    const ops: number[] = [];
    for (const i of order) {
      const task = bench.getTask(cases[i]!.name)!;
      const result = task.result;
      if (result.state !== "completed") throw new Error(`${group} / ${cases[i]!.name}: ${result.state}`);
      ops[i] = (batches[i]! * 1000) / result.period;
      perRound[i]!.ops.push(ops[i]!);
      perRound[i]!.rme.push(result.latency.rme);
    }
    for (let i = 0; i < cases.length; i++) ratios[i]!.push(ops[i]! / ops[0]!);
  }
  return {
    group,
    baseline: cases[0]!.name,
    cases: cases.map((c, i) => {
      const opsPerSecond = Math.max(...perRound[i]!.ops);
      return {
        name: c.name,
        opsPerSecond,
        medianOpsPerSecond: median(perRound[i]!.ops),
        nsPerOp: 1e9 / opsPerSecond,
        rme: median(perRound[i]!.rme),
        ratio: opsPerSecond / Math.max(...perRound[0]!.ops),
        medianRatio: median(ratios[i]!),
        ratioRange: [Math.min(...ratios[i]!), Math.max(...ratios[i]!)] as const,
      };
    }),
  };
}
