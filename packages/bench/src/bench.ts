#!/usr/bin/env node
// `pnpm bench`: runs every case, prints a table, writes results.json and RESULTS.md.
//
//   node packages/bench/dist/bench.js [--quick] [--only fixed,json,…] [--out DIR]
//   node packages/bench/dist/bench.js --only agents --merge   (one case run, its rows merged into the committed results)
//   node packages/bench/dist/bench.js --render [--out DIR]   (RESULTS.md again from results.json)
//   DIVERGE_BENCH_PROFILE=packages/bench/profiles node packages/bench/dist/bench.js --only pgwire,parity,vault --merge
//     (also writes a CPU profile of every proxy and provider process, <suite>-<role>[-n].cpuprofile;
//      node packages/bench/dist/profile-summary.js packages/bench/profiles  writes SUMMARY.md and .folded stacks)
//
// --quick (or DIVERGE_BENCH_QUICK=1) runs each case only long enough to show it works; its numbers
// mean nothing, and it writes no files unless --out says where.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { commentary } from "./commentary.js";
import { markdownReport, textReport } from "./report.js";
import { CASE_OF, runBench, SUITES, type ExtraSuites, type Results, type Suite } from "./run.js";

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
  try {
    extra.agents = (await import("./cases/agents.js")).agentsSuite;
  } catch (problem) {
    problems.agents = (problem as Error).message;
  }
  try {
    extra.pgwire = (await import("./cases/pgwire.js")).pgwireSuite;
  } catch (problem) {
    problems.pgwire = (problem as Error).message;
  }
  try {
    extra.fuse = (await import("./cases/fuse.js")).fuseSuite;
  } catch (problem) {
    problems.fuse = (problem as Error).message;
  }
  return { extra, problems };
}

/**
 * The committed results with `suites` replaced by a run of those alone: their outcomes, results,
 * tables and targets; every other case's rows kept as they were, and a `reruns` entry saying when.
 */
export function mergeInto(committed: Results, run: Results, suites: readonly Suite[]): Results {
  const cases = new Set(suites.map((suite) => CASE_OF[suite]));
  const ours = (title: string) => [...cases].some((n) => title.startsWith(`Case ${n}:`));
  const merged: Record<string, unknown> = { ...committed };
  for (const suite of suites) if ((run as unknown as Record<string, unknown>)[suite] !== undefined) merged[suite] = (run as unknown as Record<string, unknown>)[suite];
  merged.suites = [...committed.suites.filter((s) => !suites.includes(s.suite)), ...run.suites.filter((s) => suites.includes(s.suite))];
  merged.tables = [...committed.tables.filter((t) => !ours(t.title)), ...run.tables.filter((t) => ours(t.title))];
  merged.targets = [...committed.targets.filter((t) => !cases.has(t.case)), ...run.targets.filter((t) => cases.has(t.case))];
  merged.reruns = [
    ...(committed.reruns ?? []),
    { suites, date: run.machine.date, loadAverage: run.machine.loadAverage, reason: `run alone (--only ${suites.join(",")} --merge), its rows added to the full run's` },
  ];
  return merged as unknown as Results;
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
  let results = await runBench({ quick, repoRoot, suites, log: (line) => console.error(line) }, extra);
  console.log(textReport(results));
  if (args.includes("--merge")) {
    if (!suites || suites.length === 0) throw new Error("--merge needs --only: the cases whose rows replace the committed ones");
    results = mergeInto(JSON.parse(readFileSync(join(out ?? packageDir, "results.json"), "utf8")) as Results, results, suites);
  }
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
