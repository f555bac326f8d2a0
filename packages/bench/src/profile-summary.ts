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

/**
 * The profile as folded stacks (`frame;frame;frame count` per line, the format of flamegraph.pl,
 * inferno and speedscope), weighted by sampled microseconds.
 */
export function foldedStacks(profile: Profile): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const weights = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) weights.set(profile.samples[i]!, (weights.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const lines: string[] = [];
  for (const [id, micros] of weights) {
    const names: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (frame.functionName === "(root)") break;
      names.push((frame.functionName || "(anonymous)").replace(/[; ]/g, "_"));
    }
    if (names.length > 0 && micros > 0) lines.push(`${names.reverse().join(";")} ${Math.round(micros)}`);
  }
  return `${lines.sort().join("\n")}\n`;
}

function main(): void {
  const [dir, topText] = process.argv.slice(2);
  if (!dir) throw new Error("usage: profile-summary <dir> [top]");
  const top = Number(topText ?? 15);
  const lines = ["# CPU profiles: top self-time functions", "", "Each profile is `node --cpu-prof` of one process for the whole workload (idle time is `(idle)`). Open a",
    "`.cpuprofile` in Chrome DevTools (Performance) or speedscope for its flame graph; each `.folded` beside it is",
    "the same profile as folded stacks (weights in µs) for flamegraph.pl or inferno.", ""];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile")).sort()) {
    const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as Profile;
    writeFileSync(join(dir, `${basename(file, ".cpuprofile")}.folded`), foldedStacks(profile));
    const { total, rows } = selfTimes(profile);
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
