// The printed table and RESULTS.md, both made from one Results value.
import { CODEC_PROCESSES, type Results, type Table } from "./run.js";

const fmtOps = (n: number) =>
  n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} k` : n.toFixed(1);
const fmtNs = (ns: number) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs` : `${ns.toFixed(0)} ns`);

/** Every table of the run, in the order of the cases. */
export function tablesOf(results: Results): Table[] {
  const out: Table[] = [];
  for (const g of results.groups) {
    out.push({
      title: `Case ${g.suite === "fixed" ? 1 : g.suite === "json" ? 2 : 3}: ${g.group}`,
      columns: ["implementation", "ops/s (best round)", "time/op", `ratio to ${g.baseline}`, "median of rounds", "range of rounds", "per process"],
      rows: g.cases.map((c) => [
        c.name,
        fmtOps(c.opsPerSecond),
        fmtNs(c.nsPerOp),
        `${c.ratio.toFixed(2)}×`,
        `${c.medianRatio.toFixed(2)}×`,
        `${c.ratioRange[0].toFixed(2)}–${c.ratioRange[1].toFixed(2)}`,
        c.processRatios ? c.processRatios.map((r) => r.toFixed(2)).join(", ") : "—",
      ]),
    });
  }
  out.push(...results.tables);
  const gen = results.generation;
  if (gen) {
    out.push({
      title: "Case 6: generation",
      columns: ["spec", "frames", "error types", "files", "output", "generateAll (fastest)", "generateAll (median)", "CLI generate (one run)"],
      rows: gen.runs.map((r) => [
        r.spec,
        String(r.frames),
        String(r.errorTypes),
        String(r.files),
        `${(r.bytes / 2 ** 20).toFixed(1)} MB`,
        `${(r.bestMs ?? r.medianMs).toFixed(0)} ms`,
        `${r.medianMs.toFixed(0)} ms`,
        r.cliMs === undefined ? "—" : `${r.cliMs.toFixed(0)} ms`,
      ]),
      notes: [
        `${gen.growth.toFixed(2)}× the time (fastest runs; medians ${gen.medianGrowth?.toFixed(2) ?? "—"}×) for ${(gen.runs[1]!.bytes / gen.runs[0]!.bytes).toFixed(1)}× the output (${gen.growthPerByte.toFixed(2)}× per byte of output).`,
      ],
    });
  }
  return out;
}

function pad(cells: readonly string[], widths: readonly number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
}

export function textReport(results: Results): string {
  const lines: string[] = [];
  const m = results.machine;
  lines.push(`${m.cpu}, ${m.cores} cores, Node ${m.node}, ${m.date}${results.quick ? " (quick mode: numbers are not meaningful)" : ""}`);
  for (const t of tablesOf(results)) {
    lines.push("", t.title);
    const widths = t.columns.map((c, i) => Math.max(c.length, ...t.rows.map((r) => (r[i] ?? "").length)));
    lines.push(pad(t.columns, widths));
    for (const r of t.rows) lines.push(pad(r, widths));
    for (const n of t.notes ?? []) lines.push(`  ${n}`);
  }
  lines.push("", "Targets");
  for (const t of results.targets) {
    const mark = t.met === null ? "  info" : t.met ? "  met " : "MISSED";
    lines.push(`${mark}  case ${t.case}  ${t.what}: ${t.value}  [${t.goal}]`);
  }
  for (const s of results.suites.filter((s) => !s.ran)) lines.push(`not run: case ${s.suite}: ${s.reason}`);
  return lines.join("\n");
}

const cell = (s: string) => s.replace(/\|/g, "\\|");

/** A Markdown table; `numeric` right-aligns every column but the first (for tables of numbers). */
function mdTable(columns: readonly string[], rows: readonly (readonly string[])[], numeric = true): string[] {
  return [
    `| ${columns.map(cell).join(" | ")} |`,
    `| ${columns.map((_, i) => (i === 0 || !numeric ? "---" : "---:")).join(" | ")} |`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ];
}

/** RESULTS.md: the machine, how to read the numbers, the targets, then every table. */
export function markdownReport(results: Results, commentary: readonly string[] = []): string {
  const m = results.machine;
  const lines: string[] = [
    "# Benchmark results",
    "",
    "Written by `pnpm bench` (packages/bench); do not edit by hand — the commentary below the",
    "tables comes from `packages/bench/src/commentary.ts`. Raw numbers: [results.json](results.json).",
    "",
    "## Machine",
    "",
    ...mdTable(
      ["", "this run"],
      [
        ["CPU", m.cpu],
        ["cores", String(m.cores)],
        ["memory", `${m.memoryGiB} GiB (${m.freeMemoryGiB} GiB free at start)`],
        ["Node", `${m.node} (V8 ${m.v8})`],
        ["OS", m.os],
        ["date", m.date],
        ["load average at start (1, 5, 15 min)", m.loadAverage.join(", ")],
        ["mode", results.quick ? "quick (numbers not meaningful)" : "full"],
        ...(results.reruns ?? []).map((r) => [`rerun of ${r.suites.join(", ")}`, `${r.date}, load average ${r.loadAverage.join(", ")}: ${r.reason}`]),
      ],
      false,
    ),
    "",
    "## How to read it",
    "",
    `Every comparison runs its cases side by side in one process with tinybench, in ${results.timing.rounds} interleaved`,
    `rounds of ${results.timing.time * 1000} ms per case (order reversed every other round), each sample batching enough`,
    "operations to last about 50 µs, each case in a loop of its own, every result kept. Other processes can",
    "only slow a round down, so within a process a case's throughput is its best round and the ratio is",
    "best against best; the median of the per-round ratios and their range (smallest–largest round) show",
    "how much the machine's other work moved it. The JIT makes different choices in different processes,",
    `so the codec cases (1–3) run in ${results.quick ? 1 : CODEC_PROCESSES} fresh process(es) and each number is the median over them; the`,
    "last column gives each process's ratio.",
    `The machine was shared with other engineers' builds and tests while this ran (load average`,
    `${m.loadAverage.join(", ")} on ${m.cores} cores at the start), so absolute ops/s are noisy (easily ±20% between runs);`,
    "the ratios are the numbers to read, and where the median and the best-vs-best ratio disagree, trust",
    "neither beyond its first digit.",
    "",
    "## Targets",
    "",
    ...mdTable(
      ["case", "what", "target", "measured", "result"],
      results.targets.map((t) => [String(t.case), t.what, t.goal, t.value, t.met === null ? "reported" : t.met ? "met" : "**missed**"]),
      false,
    ),
    "",
  ];
  const notRun = results.suites.filter((s) => !s.ran);
  if (notRun.length) {
    lines.push("Not run:", "");
    for (const s of notRun) lines.push(`- ${s.suite}: ${s.reason}`);
    lines.push("");
  }
  lines.push("## Tables", "");
  for (const t of tablesOf(results)) {
    lines.push(`### ${t.title}`, "", ...mdTable(t.columns, t.rows, !t.title.startsWith("Case 5")), "");
    for (const n of t.notes ?? []) lines.push(n, "");
  }
  if (commentary.length) lines.push("## Notes", "", ...commentary, "");
  return lines.join("\n");
}
