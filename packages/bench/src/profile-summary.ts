#!/usr/bin/env node
// The top self-time functions of V8 CPU profiles (`node --cpu-prof`), as a Markdown table:
//   node packages/bench/dist/profile-summary.js <dir> [top]   → <dir>/SUMMARY.md
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

/** Self time per function (name + file:line), in microseconds, and the profile's total. */
export function selfTimes(profile: Profile): { total: number; rows: { name: string; where: string; micros: number }[] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const micros = new Map<string, { name: string; where: string; micros: number }>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]!);
    const delta = profile.timeDeltas[i] ?? 0;
    if (!node) continue;
    total += delta;
    const frame = node.callFrame;
    const file = frame.url.replace(/^file:\/\//, "").replace(/.*\/node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?/, "").replace(/.*\/packages\//, "packages/");
    const name = frame.functionName || "(anonymous)";
    const where = file ? `${file}:${frame.lineNumber + 1}` : "";
    const key = `${name} ${where}`;
    const entry = micros.get(key) ?? { name, where, micros: 0 };
    entry.micros += delta;
    micros.set(key, entry);
  }
  return { total, rows: [...micros.values()].sort((a, b) => b.micros - a.micros) };
}

function main(): void {
  const [dir, topText] = process.argv.slice(2);
  if (!dir) throw new Error("usage: profile-summary <dir> [top]");
  const top = Number(topText ?? 15);
  const lines = ["# CPU profiles: top self-time functions", "", "Each profile is `node --cpu-prof` of one process for the whole workload (idle time is `(idle)`).", ""];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile")).sort()) {
    const { total, rows } = selfTimes(JSON.parse(readFileSync(join(dir, file), "utf8")) as Profile);
    const busy = rows.filter((r) => r.name !== "(idle)" && r.name !== "(program)").reduce((sum, r) => sum + r.micros, 0);
    lines.push(`## ${basename(file, ".cpuprofile")}`, "", `${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s in JavaScript and native calls (not idle, not "(program)").`, "");
    lines.push("| self | % of sampled | function | where |", "| ---: | ---: | --- | --- |");
    for (const row of rows.slice(0, top)) lines.push(`| ${(row.micros / 1000).toFixed(0)} ms | ${((row.micros / total) * 100).toFixed(1)}% | \`${row.name}\` | ${row.where} |`);
    lines.push("");
  }
  writeFileSync(join(dir, "SUMMARY.md"), `${lines.join("\n")}\n`);
  process.stdout.write(`wrote ${join(dir, "SUMMARY.md")}\n`);
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) main();
