// Runs every emitter over every spec revision and either writes the results or, with `check`,
// compares them with what is on disk and reports each difference.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { buildIr, type IrRevision } from "./ir.js";
import { loadSpecDir, SpecError, SpecErrors } from "./load.js";
import { emitCodec } from "./emit/codec.js";
import { emitArbitraries, emitCodecTests, emitVectors } from "./emit/examples.js";
import { emitConformanceRegistry } from "./emit/conformance.js";
import { emitCodecPackageJson, emitCodecRoot } from "./emit/root.js";
import { emitDocs, readGuide } from "./emit/docs.js";
import { emitExchanges } from "./emit/exchanges.js";
import type { GeneratedFile } from "./emit/project.js";

/** Folders the compiler owns: every file in them is generated, so a file it no longer writes is stale. */
export const GENERATED_DIRS = [
  "packages/codec/src/gen",
  "packages/codec/test/gen",
  "packages/conformance/src/gen",
  "packages/conformance/vectors",
  "packages/server/src/gen",
  "packages/client/src/gen",
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
  const ir = buildIr(loadSpecDir(join(root, "spec", revision), root), join(root, "spec", "spec.schema.json"));
  if (ir.revision !== revision) {
    throw new SpecErrors([new SpecError({ file: `spec/${revision}`, line: 1, column: 1 }, `the folder spec/${revision} says \`revision: ${ir.revision}\`; a revision's folder and its \`revision:\` must agree.`)]);
  }
  return ir;
}

export function generateAll(root: string, compilerVersion: string): GeneratedFile[] {
  const revisions = listRevisions(root).map((rev) => compileRevision(root, rev));
  const files: GeneratedFile[] = [];
  for (const ir of revisions) {
    files.push(...emitCodec(ir, compilerVersion));
    files.push(...emitCodecTests(ir, compilerVersion));
    files.push(emitVectors(ir));
    files.push(emitArbitraries(ir, compilerVersion));
    files.push(...emitExchanges(ir, compilerVersion, ir === revisions[revisions.length - 1]));
  }
  files.push(...emitCodecRoot(revisions, compilerVersion));
  files.push(emitConformanceRegistry(revisions, compilerVersion));
  files.push(...emitDocs(revisions, compilerVersion, readGuide(root)));
  // The codec's `./<revision>` subpath exports follow the revisions under spec/.
  const codecManifest = join(root, "packages", "codec", "package.json");
  if (existsSync(codecManifest)) files.push(emitCodecPackageJson(readFileSync(codecManifest, "utf8"), revisions));
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

/** A unified diff of `before` → `after`, with three lines of context around each change. */
export function lineDiff(path: string, before: string, after: string): string {
  const a = before.split("\n");
  const b = after.split("\n");
  const ops = diffLines(a, b);
  const out = [`--- ${path} (on disk)`, `+++ ${path} (from the spec)`];
  // Group the edit script into hunks separated by more than six unchanged lines.
  let i = 0;
  while (i < ops.length) {
    while (i < ops.length && ops[i]!.op === " ") i++;
    if (i >= ops.length) break;
    let end = i;
    for (let j = i; j < ops.length; j++) {
      if (ops[j]!.op !== " ") end = j;
      else if (j - end > 6) break;
    }
    const from = Math.max(0, i - 3);
    const to = Math.min(ops.length - 1, end + 3);
    const first = ops[from]!;
    out.push(`@@ -${first.a + 1} +${first.b + 1} @@`);
    for (let k = from; k <= to; k++) out.push(`${ops[k]!.op}${ops[k]!.text}`);
    i = to + 1;
  }
  return out.join("\n");
}

interface DiffOp {
  readonly op: " " | "-" | "+";
  readonly text: string;
  /** Line index in `before` / `after` where this op stands. */
  readonly a: number;
  readonly b: number;
}

/** Longest-common-subsequence edit script over the lines between the common head and tail. */
function diffLines(a: readonly string[], b: readonly string[]): DiffOp[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tailA = a.length;
  let tailB = b.length;
  while (tailA > head && tailB > head && a[tailA - 1] === b[tailB - 1]) {
    tailA--;
    tailB--;
  }
  const ops: DiffOp[] = [];
  for (let k = 0; k < head; k++) ops.push({ op: " ", text: a[k]!, a: k, b: k });
  const n = tailA - head;
  const m = tailB - head;
  if (n * m > 4_000_000) {
    // Too large to align line by line: show the whole middle as replaced.
    for (let k = head; k < tailA; k++) ops.push({ op: "-", text: a[k]!, a: k, b: head });
    for (let k = head; k < tailB; k++) ops.push({ op: "+", text: b[k]!, a: tailA, b: k });
  } else {
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let x = n - 1; x >= 0; x--) {
      for (let y = m - 1; y >= 0; y--) {
        lcs[x]![y] = a[head + x] === b[head + y] ? lcs[x + 1]![y + 1]! + 1 : Math.max(lcs[x + 1]![y]!, lcs[x]![y + 1]!);
      }
    }
    let x = 0;
    let y = 0;
    while (x < n || y < m) {
      if (x < n && y < m && a[head + x] === b[head + y]) {
        ops.push({ op: " ", text: a[head + x]!, a: head + x, b: head + y });
        x++;
        y++;
      } else if (y < m && (x === n || lcs[x]![y + 1]! >= lcs[x + 1]![y]!)) {
        ops.push({ op: "+", text: b[head + y]!, a: head + x, b: head + y });
        y++;
      } else {
        ops.push({ op: "-", text: a[head + x]!, a: head + x, b: head + y });
        x++;
      }
    }
  }
  for (let k = 0; k < a.length - tailA; k++) ops.push({ op: " ", text: a[tailA + k]!, a: tailA + k, b: tailB + k });
  return ops;
}
