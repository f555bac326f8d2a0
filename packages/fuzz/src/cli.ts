#!/usr/bin/env node
// pnpm fuzz --seconds 600 [--seed N]: fuzzes every decoder; exits 1 and writes findings/ on any finding.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fuzz, targetsFrom } from "./fuzz.js";

const args = process.argv.slice(2);
if (args.includes("--help")) {
  process.stdout.write("diverge-fuzz [--seconds N] [--seed N]: mutation-fuzzes every generated decoder, seeded from the golden vectors.\n");
  process.exit(0);
}
const flag = (name: string, fallback: number) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const seconds = flag("--seconds", 60);
const seed = flag("--seed", Date.now() & 0xffffffff);

const here = dirname(fileURLToPath(import.meta.url));
const vectorsDir = join(here, "..", "..", "conformance", "vectors");
const vectors = readdirSync(vectorsDir)
  .filter((f) => f.endsWith(".jsonl"))
  .flatMap((f) => readFileSync(join(vectorsDir, f), "utf8").trim().split("\n").map((l) => JSON.parse(l)));

const report = fuzz(targetsFrom(vectors), { seconds, seed });
process.stdout.write(`seed ${seed}: ${report.executions} inputs in ${report.seconds.toFixed(1)} s, ${report.executionsPerSecond} executions/s, slowest decode ${report.slowest.ms.toFixed(2)} ms (${report.slowest.frame})\n`);
for (const t of report.targets) process.stdout.write(`  ${t.revision} ${t.frame.padEnd(40)} ${String(t.executions).padStart(9)} inputs, ${String(t.outcomes).padStart(3)} outcomes, corpus ${t.corpus}\n`);
if (report.findings.length > 0) {
  const out = join(here, "..", "findings");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, `findings-${seed}.json`), JSON.stringify(report.findings, null, 2));
  process.stdout.write(`${report.findings.length} finding(s), written to findings/findings-${seed}.json\n`);
  process.exitCode = 1;
} else process.stdout.write("no findings\n");
