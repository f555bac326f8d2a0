// `diverge-spec bump <from> <to>`: a new revision starts as a copy of an older one, and the older one
// is frozen. spec/released.json records every released revision with the sha256 of its YAML, so a
// released revision that changes fails `generate`, `validate` and the compiler's tests.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const REVISION_PATTERN = /^\d+\.\d+\.\d+$/;

/** Orders revisions by their three numbers (as generate's listRevisions does). */
export function compareRevisions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}
export const RELEASED_FILE = "spec/released.json";

/** A mistake in what a maintainer asked for (a bad revision, a frozen revision changed): one sentence. */
export class BumpError extends Error {
  constructor(sentence: string) {
    super(sentence);
    this.name = "BumpError";
  }
}

export interface ReleasedRevision {
  /** sha256 over every YAML file of the revision, as in the banner of each generated file. */
  readonly sha256: string;
  /** sha256 of each file's text, so a failure can name the file that changed. */
  readonly files: Readonly<Record<string, string>>;
}

export interface ReleasedFile {
  readonly $comment?: string;
  readonly revisions: Readonly<Record<string, ReleasedRevision>>;
}

const COMMENT =
  "Released spec revisions and the sha256 of their YAML. A released revision never changes: change a new one (diverge-spec bump <from> <to>). Written by diverge-spec bump and diverge-spec freeze.";

/** The YAML files of a spec folder, in the order the loader reads them. */
function specFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith(".yaml") || name.endsWith(".yml"))
    .sort();
}

/** The hashes of a spec folder; `sha256` equals the IR's `sourceHash` for the same files. */
export function hashSpecDir(dir: string): ReleasedRevision {
  const whole = createHash("sha256");
  const files: Record<string, string> = {};
  for (const name of specFiles(dir)) {
    const text = readFileSync(join(dir, name), "utf8");
    whole.update(name).update("\0").update(text).update("\0");
    files[name] = createHash("sha256").update(text).digest("hex");
  }
  return { sha256: whole.digest("hex"), files };
}

export function readReleased(root: string): ReleasedFile {
  const path = join(root, RELEASED_FILE);
  if (!existsSync(path)) return { revisions: {} };
  const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<ReleasedFile>;
  return { revisions: parsed.revisions ?? {} };
}

function writeReleased(root: string, revisions: Record<string, ReleasedRevision>): void {
  const sorted = Object.fromEntries(Object.keys(revisions).sort(compareRevisions).map((r) => [r, revisions[r]!]));
  writeFileSync(join(root, RELEASED_FILE), JSON.stringify({ $comment: COMMENT, revisions: sorted }, null, 2) + "\n");
}

/** One sentence per released revision whose YAML is missing or no longer what was released. */
export function checkReleased(root: string): string[] {
  const problems: string[] = [];
  for (const [revision, frozen] of Object.entries(readReleased(root).revisions)) {
    const dir = join(root, "spec", revision);
    if (!existsSync(dir)) {
      problems.push(`spec/${revision} is a released revision (${RELEASED_FILE}) but the folder is gone; a released revision is never removed.`);
      continue;
    }
    const now = hashSpecDir(dir);
    if (now.sha256 === frozen.sha256) continue;
    const names = [...new Set([...Object.keys(frozen.files), ...Object.keys(now.files)])].sort();
    const what = names
      .map((name) => {
        const was = frozen.files[name];
        const is = now.files[name];
        if (was === is) return undefined;
        return `${name} ${was === undefined ? "was added" : is === undefined ? "was removed" : "changed"}`;
      })
      .filter((x) => x !== undefined);
    problems.push(
      `spec/${revision} is a released revision and its YAML changed (${what.join(", ") || "files renamed"}); ` +
        `released at sha256 ${frozen.sha256.slice(0, 12)}…, now ${now.sha256.slice(0, 12)}…. ` +
        `Undo the edit and make it in a new revision: \`diverge-spec bump ${revision} <next>\`.`,
    );
  }
  return problems;
}

/** Records `revision` as released with its current hashes (it must exist). Returns the sha256. */
export function freeze(root: string, revision: string): string {
  checkRevisionName(revision);
  const dir = join(root, "spec", revision);
  if (!existsSync(dir)) throw new BumpError(`there is no spec/${revision} to freeze.`);
  const released = { ...readReleased(root).revisions };
  const now = hashSpecDir(dir);
  const was = released[revision];
  if (was && was.sha256 !== now.sha256) {
    throw new BumpError(checkReleased(root).find((p) => p.startsWith(`spec/${revision} `)) ?? `spec/${revision} changed since it was released.`);
  }
  released[revision] = now;
  writeReleased(root, released);
  return now.sha256;
}

function checkRevisionName(revision: string): void {
  if (!REVISION_PATTERN.test(revision)) throw new BumpError(`"${revision}" is not a revision: a revision is three numbers, like 2.4.0.`);
}

export interface BumpResult {
  readonly from: string;
  readonly to: string;
  readonly files: readonly string[];
  readonly frozenSha256: string;
}

/**
 * Copies spec/<from>/ to spec/<to>/ with `revision:` (and the revision in `title:`) rewritten, and
 * freezes <from>. Refuses a <to> that exists or is not newer than <from>. Regenerating is the caller's.
 */
export function bump(root: string, from: string, to: string): BumpResult {
  checkRevisionName(from);
  checkRevisionName(to);
  const fromDir = join(root, "spec", from);
  const toDir = join(root, "spec", to);
  if (!existsSync(fromDir) || !statSync(fromDir).isDirectory()) throw new BumpError(`there is no spec/${from} to bump from.`);
  if (existsSync(toDir)) throw new BumpError(`spec/${to} already exists; pick a revision that does not.`);
  if (compareRevisions(to, from) <= 0) throw new BumpError(`${to} is not newer than ${from}; the new revision must be greater.`);
  const frozenProblem = checkReleased(root).find((p) => p.startsWith(`spec/${from} `));
  if (frozenProblem) throw new BumpError(frozenProblem);

  const names = readdirSync(fromDir).filter((name) => statSync(join(fromDir, name)).isFile()).sort();
  const texts = new Map<string, string>();
  let revisionLines = 0;
  const escaped = from.replace(/\./g, "\\.");
  const revisionLine = new RegExp(`^revision:[ \\t]*(["']?)${escaped}\\1[ \\t]*(#.*)?$`, "m");
  const titleLine = new RegExp(`^(title:.*?)\\b${escaped}\\b`, "m");
  for (const name of names) {
    let text = readFileSync(join(fromDir, name), "utf8");
    if (name.endsWith(".yaml") || name.endsWith(".yml")) {
      if (revisionLine.test(text)) {
        revisionLines++;
        text = text.replace(revisionLine, (_line, _quote, comment?: string) => `revision: ${to}${comment ? ` ${comment}` : ""}`);
        text = text.replace(titleLine, (_all, head: string) => `${head}${to}`);
      }
    }
    texts.set(name, text);
  }
  if (revisionLines !== 1) {
    throw new BumpError(`spec/${from} should say \`revision: ${from}\` in exactly one file, and says it in ${revisionLines}.`);
  }
  const frozenSha256 = freeze(root, from);
  mkdirSync(toDir, { recursive: true });
  for (const [name, text] of texts) writeFileSync(join(toDir, name), text);
  return { from, to, files: names.map((n) => `spec/${to}/${n}`), frozenSha256 };
}
