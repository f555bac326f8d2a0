// Runs every emitter over every spec revision and either writes the results or, with `check`,
// compares them with what is on disk and reports each difference.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { buildIr, type IrRevision } from "./ir.js";
import { loadSpecDir } from "./load.js";
import { emitCodec } from "./emit/codec.js";
import { emitCodecTests, emitVectors } from "./emit/examples.js";
import { emitConformanceRegistry } from "./emit/conformance.js";
import { emitCodecRoot } from "./emit/root.js";
import { emitDocs } from "./emit/docs.js";
import type { GeneratedFile } from "./emit/project.js";

/** Folders the compiler owns: every file in them is generated, so a file it no longer writes is stale. */
export const GENERATED_DIRS = [
  "packages/codec/src/gen",
  "packages/codec/test/gen",
  "packages/conformance/src/gen",
  "packages/conformance/vectors",
  "docs",
];

export function compareRevisions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

export function listRevisions(root: string): string[] {
  const specDir = join(root, "spec");
  return readdirSync(specDir)
    .filter((name) => /^\d+\.\d+\.\d+$/.test(name) && statSync(join(specDir, name)).isDirectory())
    .sort(compareRevisions);
}

export function compileRevision(root: string, revision: string): IrRevision {
  return buildIr(loadSpecDir(join(root, "spec", revision), root), join(root, "spec", "spec.schema.json"));
}

export function generateAll(root: string, compilerVersion: string): GeneratedFile[] {
  const revisions = listRevisions(root).map((rev) => compileRevision(root, rev));
  const files: GeneratedFile[] = [];
  for (const ir of revisions) {
    files.push(...emitCodec(ir, compilerVersion));
    files.push(...emitCodecTests(ir, compilerVersion));
    files.push(emitVectors(ir));
  }
  files.push(...emitCodecRoot(revisions, compilerVersion));
  files.push(emitConformanceRegistry(revisions, compilerVersion));
  files.push(...emitDocs(revisions, compilerVersion));
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

export interface Drift {
  readonly changed: readonly { path: string; diff: string }[];
  readonly missing: readonly string[];
  readonly stale: readonly string[];
}

export function findDrift(root: string, files: readonly GeneratedFile[]): Drift {
  const changed: { path: string; diff: string }[] = [];
  const missing: string[] = [];
  for (const file of files) {
    const full = join(root, file.path);
    if (!existsSync(full)) missing.push(file.path);
    else {
      const now = readFileSync(full, "utf8");
      if (now !== file.text) changed.push({ path: file.path, diff: lineDiff(file.path, now, file.text) });
    }
  }
  const wanted = new Set(files.map((f) => f.path));
  const stale = GENERATED_DIRS.flatMap((dir) => walk(root, dir)).filter((p) => !wanted.has(p));
  return { changed, missing, stale };
}

export function writeAll(root: string, files: readonly GeneratedFile[]): { written: number; removed: number } {
  const drift = findDrift(root, files);
  const toWrite = new Set([...drift.changed.map((c) => c.path), ...drift.missing]);
  for (const file of files) {
    if (!toWrite.has(file.path)) continue;
    const full = join(root, file.path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, file.text);
  }
  for (const path of drift.stale) rmSync(join(root, path));
  return { written: toWrite.size, removed: drift.stale.length };
}

function walk(root: string, dir: string): string[] {
  const full = join(root, dir);
  if (!existsSync(full)) return [];
  const out: string[] = [];
  for (const name of readdirSync(full)) {
    const rel = `${dir}/${name}`;
    if (statSync(join(root, rel)).isDirectory()) out.push(...walk(root, rel));
    else out.push(rel);
  }
  return out;
}

/** A unified diff of the one region where `before` and `after` differ, with three lines of context. */
export function lineDiff(path: string, before: string, after: string): string {
  const a = before.split("\n");
  const b = after.split("\n");
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length - 1;
  let endB = b.length - 1;
  while (endA >= start && endB >= start && a[endA] === b[endB]) {
    endA--;
    endB--;
  }
  const from = Math.max(0, start - 3);
  const out = [`--- ${path} (on disk)`, `+++ ${path} (from the spec)`, `@@ -${from + 1} +${from + 1} @@`];
  for (let i = from; i < start; i++) out.push(` ${a[i]}`);
  const shown = 40;
  const removed = a.slice(start, endA + 1);
  const added = b.slice(start, endB + 1);
  for (const line of removed.slice(0, shown)) out.push(`-${line}`);
  if (removed.length > shown) out.push(`-… ${removed.length - shown} more lines`);
  for (const line of added.slice(0, shown)) out.push(`+${line}`);
  if (added.length > shown) out.push(`+… ${added.length - shown} more lines`);
  for (let i = endA + 1; i < Math.min(a.length, endA + 4); i++) out.push(` ${a[i]}`);
  return out.join("\n");
}
