#!/usr/bin/env node
// `pnpm bench`: runs every case, prints a table, writes results.json and RESULTS.md.
//
//   node packages/bench/dist/bench.js [--quick] [--only fixed,json,…] [--out DIR]
//   node packages/bench/dist/bench.js --render [--out DIR]   (RESULTS.md again from results.json)
//
// --quick (or DIVERGE_BENCH_QUICK=1) runs each case only long enough to show it works; its numbers
// mean nothing, and it writes no files unless --out says where.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { commentary } from "./commentary.js";
import { markdownReport, textReport } from "./report.js";
import { runBench, SUITES, type ExtraSuites, type Results, type Suite } from "./run.js";

const here = dirname(fileURLToPath(import.meta.url));
const packageDir = resolve(here, "..");
const repoRoot = resolve(packageDir, "..", "..");

function argValue(args: readonly string[], name: string): string | undefined {
  const at = args.indexOf(name);
  if (at >= 0) return args[at + 1];
  const inline = args.find((a) => a.startsWith(`${name}=`));
  return inline?.slice(name.length + 1);
}

/** The relay, memory and start-up suites need the server and client packages; load them only if present. */
export async function loadExtraSuites(): Promise<{ extra: ExtraSuites; problems: Record<string, string> }> {
  const extra: ExtraSuites = {};
  const problems: Record<string, string> = {};
  try {
    extra.relay = (await import("./cases/relay.js")).relaySuite;
  } catch (problem) {
    problems.relay = (problem as Error).message;
  }
  try {
    extra.memory = (await import("./cases/memory.js")).memorySuite;
  } catch (problem) {
    problems.memory = (problem as Error).message;
  }
  try {
    extra.startup = (await import("./cases/startup.js")).startupSuite;
  } catch (problem) {
    problems.startup = (problem as Error).message;
  }
  try {
    extra.parity = (await import("./cases/parity.js")).paritySuite;
  } catch (problem) {
    problems.parity = (problem as Error).message;
  }
  try {
    extra.vault = (await import("./cases/vault.js")).vaultSuite;
  } catch (problem) {
    problems.vault = (problem as Error).message;
  }
  try {
    extra.filesystem = (await import("./cases/filesystem.js")).filesystemSuite;
  } catch (problem) {
    problems.filesystem = (problem as Error).message;
  }
  return { extra, problems };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes("--quick") || process.env.DIVERGE_BENCH_QUICK === "1";
  const only = argValue(args, "--only");
  const suites = only ? (only.split(",").filter((s) => (SUITES as readonly string[]).includes(s)) as Suite[]) : undefined;
  const outArg = argValue(args, "--out");
  const out = outArg ? resolve(outArg) : quick ? undefined : packageDir;
  if (args.includes("--render")) {
    const dir = out ?? packageDir;
    const results = JSON.parse(readFileSync(join(dir, "results.json"), "utf8")) as Results;
    writeFileSync(join(dir, "RESULTS.md"), markdownReport(results, commentary));
    console.log(`wrote ${join(dir, "RESULTS.md")} from ${join(dir, "results.json")}`);
    return;
  }
  const { extra, problems } = await loadExtraSuites();
  for (const [suite, why] of Object.entries(problems)) console.error(`bench: the ${suite} suite cannot load: ${why}`);
  const results = await runBench({ quick, repoRoot, suites, log: (line) => console.error(line) }, extra);
  console.log(textReport(results));
  if (out) {
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(join(out, "RESULTS.md"), markdownReport(results, commentary));
    console.log(`\nwrote ${join(out, "results.json")} and ${join(out, "RESULTS.md")}`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((problem) => {
    console.error(problem);
    process.exitCode = 1;
  });
}
