// CI runs every benchmark in quick mode: it checks they RUN and produce a complete report, never
// how fast anything is. Speed is judged by `pnpm bench` on a quiet machine, not here.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadExtraSuites } from "../src/bench.js";
import { markdownReport, textReport } from "../src/report.js";
import { runBench, SUITES } from "../src/run.js";

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

describe("pnpm bench --quick", () => {
  it("runs every case and reports every target", async () => {
    const { extra, problems } = await loadExtraSuites();
    expect(problems).toEqual({});
    const results = await runBench({ quick: true, repoRoot }, extra);
    // Every suite ran; one that cannot run says why, and that fails here.
    expect(results.suites.map((s) => s.suite).sort()).toEqual([...SUITES].sort());
    for (const s of results.suites) expect(s, `${s.suite}: ${s.reason}`).toMatchObject({ ran: true });
    expect(results.groups.length).toBeGreaterThanOrEqual(18);
    for (const g of results.groups) {
      for (const c of g.cases) {
        expect(Number.isFinite(c.opsPerSecond) && c.opsPerSecond > 0, `${g.group} / ${c.name}`).toBe(true);
        expect(Number.isFinite(c.ratio), `${g.group} / ${c.name}`).toBe(true);
      }
    }
    // Each numbered case contributes at least one target line (met, missed or reported).
    for (const n of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]) expect(results.targets.some((t) => t.case === n), `case ${n}`).toBe(true);
    for (const t of results.targets) expect(t.value.length).toBeGreaterThan(0);
    expect(results.generation!.runs).toHaveLength(2);
    expect(results.generation!.runs[1]!.frames).toBe(2 * results.generation!.runs[0]!.frames);

    const md = markdownReport(results);
    for (const part of [results.machine.cpu, `${results.machine.cores}`, results.machine.node, results.machine.date, "## Targets"]) {
      expect(md).toContain(part);
    }
    expect(textReport(results)).toContain("Targets");
    // Every suite, each in quick mode, on a two-core machine other jobs share: minutes, not seconds.
  }, 900_000);
});
