// The changeset of a spec bump, written from its diff: every public @diverge/* package (one fixed
// group) with the bump the changes need, and a summary of which tags, kinds and exchanges changed.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Change, ChangeArea, Evolution } from "./diff.js";

export interface WorkspacePackage {
  readonly name: string;
  readonly version: string;
  readonly dir: string;
}

/** Every public @diverge/* package of the workspace (the folders pnpm-workspace.yaml names), by name. */
export function publicPackages(root: string): WorkspacePackage[] {
  const out: WorkspacePackage[] = [];
  for (const parent of workspaceParents(root)) {
    const full = join(root, parent);
    if (!existsSync(full)) continue;
    for (const name of readdirSync(full).sort()) {
      const manifest = join(full, name, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string; private?: boolean };
      if (pkg.private || !pkg.name?.startsWith("@diverge/")) continue;
      out.push({ name: pkg.name, version: pkg.version ?? "0.0.0", dir: `${parent}/${name}` });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** The `dir/*` globs of pnpm-workspace.yaml (only that form is used here), or packages/ alone. */
function workspaceParents(root: string): string[] {
  const path = join(root, "pnpm-workspace.yaml");
  if (!existsSync(path)) return ["packages"];
  const globs = [...readFileSync(path, "utf8").matchAll(/^\s*-\s*["']?([^"'\s]+)\/\*["']?\s*$/gm)].map((m) => m[1]!);
  return globs.length > 0 ? globs : ["packages"];
}

const SECTIONS: readonly { title: string; areas: readonly ChangeArea[] }[] = [
  { title: "Tags and kinds", areas: ["tag"] },
  { title: "Exchanges", areas: ["exchange"] },
  { title: "Frames", areas: ["frame", "channel"] },
  { title: "Errors", areas: ["error"] },
  { title: "Other", areas: ["revision", "mcp", "port"] },
];

/** The name of the changeset file of a bump: `.changeset/spec-<to>.md`. */
export const changesetName = (e: Evolution) => `spec-${e.to}`;

/** The Markdown of the changeset; throws when the evolution is not allowed. */
export function renderChangeset(e: Evolution, packages: readonly WorkspacePackage[]): string {
  if (!e.ok || !e.bump) throw new Error(`no changeset for ${e.from} → ${e.to}: the diff fails (run \`diverge-spec diff ${e.from} ${e.to}\`).`);
  const lines = ["---", ...packages.map((p) => `"${p.name}": ${e.bump}`), "---", ""];
  const counted = (cls: Change["class"]) => e.changes.filter((c) => c.class === cls).length;
  const plural = (n: number, what: string) => `${n} ${what} change${n === 1 ? "" : "s"}`;
  const kinds = (["breaking", "additive", "editorial"] as const)
    .filter((cls) => counted(cls) > 0)
    .map((cls) => plural(counted(cls), cls))
    .join(", ");
  lines.push(
    `Implements spec revision ${e.to} (from ${e.from}): ${kinds || "no change to the protocol"}. ` +
      `The package root speaks ${e.to}; \`@diverge/codec/${e.from}\` still speaks ${e.from}.`,
  );
  for (const section of SECTIONS) {
    const list = e.changes.filter((c) => c.class !== "editorial" && section.areas.includes(c.area));
    if (list.length === 0) continue;
    lines.push("", `${section.title}:`, "");
    for (const c of list) lines.push(`- ${c.class}: ${c.sentence}`);
  }
  const editorial = e.changes.filter((c) => c.class === "editorial");
  if (editorial.length > 0) {
    lines.push("", "Editorial (docs, rules, examples):", "");
    for (const c of editorial) lines.push(`- ${c.sentence}`);
  }
  return lines.join("\n") + "\n";
}

/** Writes `.changeset/spec-<to>.md` and returns its path relative to the root, and any warning. */
export function writeChangeset(root: string, e: Evolution): { path: string; warnings: string[] } {
  const packages = publicPackages(root);
  const text = renderChangeset(e, packages);
  const majorMinor = (v: string) => v.split(".").slice(0, 2).join(".");
  const warnings = packages
    .map((p) => ({ p, landing: bumped(p.version, e.bump!) }))
    .filter(({ landing }) => majorMinor(landing) !== majorMinor(e.to) || landing.localeCompare(e.to, "en", { numeric: true }) < 0)
    .map(({ p, landing }) => `${p.name} is at ${p.version}: after \`changeset version\` it will be at ${landing}, not ${e.to}.`);
  const dir = join(root, ".changeset");
  mkdirSync(dir, { recursive: true });
  const path = `.changeset/${changesetName(e)}.md`;
  writeFileSync(join(root, path), text);
  return { path, warnings };
}

/** The version after a bump of `kind` (what `changeset version` gives a package at `version`). */
export function bumped(version: string, kind: "major" | "minor" | "patch"): string {
  const [major, minor, patch] = version.split(".").map((n) => parseInt(n, 10)) as [number, number, number];
  if (kind === "major") return `${major + 1}.0.0`;
  if (kind === "minor") return `${major}.${minor + 1}.0`;
  return `${major}.${minor}.${patch + 1}`;
}

/** The `"name": bump` lines of a changeset's front matter. */
export function changesetBumps(text: string): Record<string, string> {
  const front = /^---\n([\s\S]*?)\n---/.exec(text)?.[1] ?? "";
  return Object.fromEntries([...front.matchAll(/^\s*["']?([^"':]+)["']?\s*:\s*(major|minor|patch)\s*$/gm)].map((m) => [m[1]!, m[2]!]));
}

/**
 * Changesets written by hand (every one but `spec-<revision>.md`) may only give patch bumps: the
 * major and minor numbers belong to the spec revision, so a change without a spec bump is a patch.
 */
function largerThanPatch(root: string): string[] {
  const dir = join(root, ".changeset");
  if (!existsSync(dir)) return [];
  const problems: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith(".md") || name === "README.md" || /^spec-\d+\.\d+\.\d+\.md$/.test(name)) continue;
    for (const [pkg, bump] of Object.entries(changesetBumps(readFileSync(join(dir, name), "utf8")))) {
      if (bump !== "patch") {
        problems.push(`.changeset/${name} gives ${pkg} a ${bump} bump; versions follow the spec revision, so a change without a spec bump is a patch (a new revision and \`pnpm spec diff --changeset\` bring minor and major bumps).`);
      }
    }
  }
  return problems;
}

/**
 * Whether a spec revision newer than the packages has its changeset, in step with its diff: the
 * check CI runs (`diverge-spec changeset --check`), which needs no git history. `diff(a, b)` is the
 * evolution from the revision before the newest to the newest. Returns one sentence per problem.
 */
export function checkPendingChangeset(root: string, revisions: readonly string[], diff: (a: string, b: string) => Evolution): { problems: string[]; note: string } {
  const packages = publicPackages(root);
  const versions = [...new Set(packages.map((p) => p.version))];
  if (versions.length !== 1) {
    return { problems: [`the @diverge/* packages are released together but are at ${versions.join(", ") || "no version"}: ${packages.map((p) => `${p.name} ${p.version}`).join(", ")}.`], note: "" };
  }
  const version = versions[0]!;
  const newest = revisions[revisions.length - 1];
  if (!newest) return { problems: ["there is no revision under spec/."], note: "" };
  const larger = largerThanPatch(root);
  if (larger.length > 0) return { problems: larger, note: "" };
  const order = (a: string, b: string) => {
    const [pa, pb] = [a.split(".").map(Number), b.split(".").map(Number)];
    for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
    return 0;
  };
  if (order(newest, version) <= 0) return { problems: [], note: `the packages (${version}) implement the newest revision, ${newest}; no spec changeset is pending.` };
  const previous = [...revisions].filter((r) => order(r, newest) < 0).pop();
  if (!previous) return { problems: [`spec/${newest} is the only revision but the packages are at ${version}.`], note: "" };
  const path = `.changeset/spec-${newest}.md`;
  const full = join(root, path);
  if (!existsSync(full)) {
    return { problems: [`spec/${newest} is newer than the packages (${version}) and ${path} is missing: run \`pnpm spec diff ${previous} ${newest} --changeset\`.`], note: "" };
  }
  const e = diff(previous, newest);
  if (!e.ok || !e.bump) return { problems: [`${path} is pending, but ${previous} → ${newest} fails the evolution check: run \`pnpm spec diff ${previous} ${newest}\`.`], note: "" };
  const problems: string[] = [];
  const said = changesetBumps(readFileSync(full, "utf8"));
  for (const p of packages) {
    if (said[p.name] !== e.bump) {
      problems.push(`${path} gives ${p.name} ${said[p.name] ? `a ${said[p.name]} bump` : "no bump"}; ${previous} → ${newest} needs ${e.bump}: rerun \`pnpm spec diff ${previous} ${newest} --changeset\`.`);
    }
  }
  // Versions follow the revision: the same major.minor, and a patch number at least the revision's
  // (the patch number also counts fixes released without a spec change).
  const landing = bumped(version, e.bump);
  const majorMinor = (v: string) => v.split(".").slice(0, 2).join(".");
  if (problems.length === 0 && (majorMinor(landing) !== majorMinor(newest) || order(landing, newest) < 0)) {
    problems.push(`${path} takes the packages from ${version} to ${landing}, not to ${newest}: versions follow the spec revision, so name the revision ${landing} or release the packages at ${previous} first.`);
  }
  return { problems, note: problems.length === 0 ? `${path} takes the packages from ${version} to ${landing} (${e.bump}), implementing ${newest}.` : "" };
}
