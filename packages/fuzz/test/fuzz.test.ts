// The short fuzz pass CI runs: every decoder, a few seconds, no finding allowed.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { fuzz, targetsFrom } from "../src/fuzz.js";
import { registry } from "@diverge/conformance";

const here = dirname(fileURLToPath(import.meta.url));
const vectorsDir = join(here, "..", "..", "conformance", "vectors");
const vectors = readdirSync(vectorsDir)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) => readFileSync(join(vectorsDir, f), "utf8").trim().split("\n").map((l) => JSON.parse(l)));

describe("fuzzing every decoder", () => {
  it("finds nothing in a short seeded pass, and reaches every decoder", () => {
    const seconds = Number(process.env.DIVERGE_FUZZ_SECONDS ?? 8);
    const report = fuzz(targetsFrom(vectors), { seconds, seed: 20261129 });
    expect(report.findings).toEqual([]);
    const frames = Object.values(registry).reduce((n, frames) => n + Object.keys(frames).length, 0);
    expect(report.targets).toHaveLength(frames);
    for (const t of report.targets) {
      expect(t.executions).toBeGreaterThan(100);
      // Each decoder was driven both to values and to errors, from its seeds.
      expect(t.outcomes).toBeGreaterThan(1);
    }
    console.log(`fuzz: ${report.executions} inputs, ${report.executionsPerSecond}/s, slowest ${report.slowest.ms.toFixed(2)} ms`);
  });

  it("reports a decoder that throws anything but its own error", () => {
    const [target] = targetsFrom(vectors);
    const broken = { ...target!, entry: { ...target!.entry, decode: () => { throw new RangeError("offset is outside the bounds"); } } };
    const report = fuzz([broken], { seconds: 0.05, seed: 1 });
    expect(report.findings.length).toBeGreaterThan(0);
    expect(report.findings[0]!.problem).toContain("RangeError");
  });

  const spin = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };

  it("reports a decoder that is slow on an input every time, and not one slow once (the machine's, not the decoder's)", () => {
    const [target] = targetsFrom(vectors);
    const decode = target!.entry.decode;
    const slow = { ...target!, corpus: [...target!.corpus], outcomes: new Set<string>(), executions: 0, entry: { ...target!.entry, decode: (bytes: Uint8Array) => (bytes.length > 0 && bytes[0]! % 8 === 0 && spin(15), decode(bytes)) } };
    const slowReport = fuzz([slow], { seconds: 0.05, seed: 1, slowMs: 10 });
    expect(slowReport.findings.length).toBeGreaterThan(0);
    expect(slowReport.findings[0]!.problem).toMatch(/^took \d+ ms, then \d+ ms at best of three$/);
    let calls = 0;
    const once = { ...target!, corpus: [...target!.corpus], outcomes: new Set<string>(), executions: 0, entry: { ...target!.entry, decode: (bytes: Uint8Array) => (calls++ === 0 && spin(30), decode(bytes)) } };
    expect(fuzz([once], { seconds: 0.05, seed: 1, slowMs: 10 }).findings).toEqual([]);
  });
});
