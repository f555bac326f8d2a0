// Mutation fuzzing of every decoder of every revision. Guided by outcomes: an input whose result
// (value variant, or error variant and message shape) was not seen before joins the corpus, so the
// corpus spreads over every way each frame can decode or fail.
import { fromHex } from "@diverge/codec";
import { registry, type FrameEntry } from "@diverge/conformance";
import { mutate, Random } from "./mutate.js";

export interface FuzzTarget {
  readonly revision: string;
  readonly frame: string;
  readonly entry: FrameEntry;
  readonly corpus: Uint8Array[];
  readonly outcomes: Set<string>;
  executions: number;
}

export interface Finding {
  readonly revision: string;
  readonly frame: string;
  readonly hex: string;
  readonly problem: string;
}

export interface FuzzReport {
  readonly seconds: number;
  readonly executions: number;
  readonly executionsPerSecond: number;
  readonly targets: readonly { revision: string; frame: string; executions: number; corpus: number; outcomes: number }[];
  readonly findings: readonly Finding[];
  /** The slowest single decode seen, in milliseconds, and the frame it was. */
  readonly slowest: { readonly ms: number; readonly frame: string };
}

/** Seeds: the golden bytes of every frame from the vector corpus, by revision and frame. */
export function targetsFrom(vectors: readonly { input: { revision: string; frame: string; decode?: string } ; expect: { hex?: string } }[]): FuzzTarget[] {
  const targets: FuzzTarget[] = [];
  for (const [revision, frames] of Object.entries(registry)) {
    for (const [frame, entry] of Object.entries(frames)) {
      const seeds = vectors
        .filter((v) => v.input.revision === revision && v.input.frame === frame)
        .flatMap((v) => [v.input.decode, v.expect.hex].filter((h): h is string => typeof h === "string"))
        .map((h) => fromHex(h));
      targets.push({ revision, frame, entry, corpus: seeds.length > 0 ? seeds : [new Uint8Array(0)], outcomes: new Set(), executions: 0 });
    }
  }
  return targets;
}

/** What one decode did, coarse enough that the set of outcomes stays small. */
function outcome(entry: FrameEntry, bytes: Uint8Array): string {
  try {
    const value = entry.decode(bytes) as Record<string, unknown>;
    return `ok:${entry.discriminant ? String(value[entry.discriminant]) : ""}:${bytes.length === 0 ? 0 : Math.min(3, Math.ceil(Math.log10(bytes.length + 1)))}`;
  } catch (error) {
    if (error instanceof entry.error) return `err:${error.variant}:${error.message.replace(/\d+/g, "N").slice(0, 60)}`;
    throw error;
  }
}

export function fuzz(targets: readonly FuzzTarget[], options: { seconds: number; seed: number; slowMs?: number }): FuzzReport {
  const random = new Random(options.seed);
  const findings: Finding[] = [];
  const slowMs = options.slowMs ?? 250;
  let slowest = { ms: 0, frame: "" };
  const started = performance.now();
  const deadline = started + options.seconds * 1000;
  let executions = 0;
  // Round-robin in small batches so every decoder gets its share of the time.
  while (performance.now() < deadline) {
    for (const target of targets) {
      for (let k = 0; k < 64; k++) {
        const input = mutate(random, random.pick(target.corpus), random.pick(target.corpus));
        const t0 = performance.now();
        let seen: string;
        try {
          seen = outcome(target.entry, input);
        } catch (error) {
          findings.push({ revision: target.revision, frame: target.frame, hex: Buffer.from(input).toString("hex"), problem: `threw ${String((error as Error)?.stack ?? error)}` });
          continue;
        } finally {
          executions++;
          target.executions++;
        }
        const ms = performance.now() - t0;
        if (ms > slowest.ms) slowest = { ms, frame: target.frame };
        if (ms > slowMs) {
          // One slow run can be the machine's (a collection, another process on the core); a decoder
          // slow on this input is slow every time, so it is a finding when the fastest of three more runs is.
          const again = Math.min(
            ...[0, 1, 2].map(() => {
              const t = performance.now();
              outcome(target.entry, input);
              return performance.now() - t;
            }),
          );
          if (again > slowMs) findings.push({ revision: target.revision, frame: target.frame, hex: Buffer.from(input).toString("hex").slice(0, 200), problem: `took ${ms.toFixed(0)} ms, then ${again.toFixed(0)} ms at best of three` });
        }
        if (!target.outcomes.has(seen)) {
          target.outcomes.add(seen);
          if (input.length <= 4096) target.corpus.push(input);
        }
      }
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    seconds,
    executions,
    executionsPerSecond: Math.round(executions / seconds),
    targets: targets.map((t) => ({ revision: t.revision, frame: t.frame, executions: t.executions, corpus: t.corpus.length, outcomes: t.outcomes.size })),
    findings,
    slowest,
  };
}
