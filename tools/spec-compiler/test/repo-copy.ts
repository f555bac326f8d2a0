// A temporary copy of the repository (the files git sees; node_modules linked, not reinstalled), for
// the end-to-end tests that generate, build and run in it.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { repoRoot } from "./fixtures/materialize.js";

const node = process.execPath;

/**
 * Copies the working tree as git sees it (tracked files, and new files not ignored, so work in
 * progress that tracked files already import comes along), then links each package's node_modules
 * entries to the real ones.
 */
export function copyRepository(prefix = "diverge-bump-e2e-"): string {
  const dest = mkdtempSync(join(tmpdir(), prefix));
  for (const file of filesOfRepository()) {
    const from = join(repoRoot, file);
    if (!existsSync(from)) continue; // deleted in the working tree
    mkdirSync(dirname(join(dest, file)), { recursive: true });
    cpSync(from, join(dest, file));
  }
  symlinkSync(join(repoRoot, "node_modules"), join(dest, "node_modules"), "dir");
  for (const parent of ["packages", "tools"]) {
    for (const name of existsSync(join(dest, parent)) ? readdirSync(join(dest, parent)) : []) {
      const modules = join(repoRoot, parent, name, "node_modules");
      if (existsSync(modules)) linkModules(modules, join(dest, parent, name, "node_modules"), dest);
    }
  }
  return dest;
}

/** The files git sees; without git (an exported tree), every file but installs and build output. */
function filesOfRepository(): string[] {
  try {
    return execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\0")
      .filter(Boolean);
  } catch {
    const skip = new Set(["node_modules", "dist", ".git", ".turbo", "coverage"]);
    const walk = (dir: string): string[] =>
      readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((entry) => {
        if (skip.has(entry.name)) return [];
        const rel = dir ? `${dir}/${entry.name}` : entry.name;
        return entry.isDirectory() ? walk(rel) : entry.isFile() ? [rel] : [];
      });
    return walk("");
  }
}

/** Workspace links (@diverge/*) point into the copy; every other package at the real one. */
function linkModules(from: string, to: string, dest: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from)) {
    if (entry.startsWith(".")) continue; // .bin, .vite: the copy makes its own
    const source = join(from, entry);
    if (entry.startsWith("@") && !lstatSync(source).isSymbolicLink()) {
      linkModules(source, join(to, entry), dest);
      continue;
    }
    const real = realpathSync(source);
    const inRepo = relative(repoRoot, real);
    const workspace = lstatSync(source).isSymbolicLink() && !inRepo.startsWith("..") && !inRepo.split("/").includes("node_modules");
    symlinkSync(workspace ? join(dest, inRepo) : real, join(to, entry), "dir");
  }
}

/** Runs node with `args` in `cwd`; a run that outlasts `timeoutMs` (a hang guard: a build of a package is minutes under load) is killed and says so in `out`. */
export function run(cwd: string, args: string[], timeoutMs = 600_000) {
  const r = spawnSync(node, args, { cwd, encoding: "utf8", timeout: timeoutMs, killSignal: "SIGKILL", env: { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1" } });
  const killed = r.error ? `\n${r.error.message}` : "";
  return { status: r.status, out: `${r.stdout}${r.stderr}${killed}`, stdout: r.stdout, stderr: `${r.stderr}${killed}` };
}

