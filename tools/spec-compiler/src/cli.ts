#!/usr/bin/env node
// diverge-spec: the spec compiler's command line.
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findDrift, generateAll, writeAll } from "./generate.js";
import { SpecErrors } from "./load.js";
import { evolutionUsage, refuseChangedReleases, runEvolutionCommand } from "./cli-evolution.js";

const here = dirname(fileURLToPath(import.meta.url));
const version = (JSON.parse(readFileSync(join(here, "..", "package.json"), "utf8")) as { version: string }).version;

const usage = `diverge-spec ${version}: compiles spec/<revision>/*.yaml into generated code, vectors and docs.

Usage:
  diverge-spec generate [--check] [--root DIR]   regenerate every generated file (--check: write nothing,
                                                 print a diff and exit 1 when any file is out of date)
  diverge-spec validate [--root DIR]             check the spec only
${evolutionUsage}  diverge-spec --help | --version
`;

function main(argv: string[]): number {
  const args = argv.slice(2);
  if (args.includes("--help") || args.includes("-h") || args.length === 0) {
    process.stdout.write(usage);
    return args.length === 0 ? 2 : 0;
  }
  if (args.includes("--version")) {
    process.stdout.write(`${version}\n`);
    return 0;
  }
  const rootAt = args.indexOf("--root");
  const root = resolve(rootAt >= 0 ? args[rootAt + 1]! : findRoot(process.cwd()));
  const command = args[0];
  try {
    const evolution = runEvolutionCommand(command, args, root, version);
    if (evolution !== undefined) return evolution;
    if (command === "validate" || command === "generate") {
      const refused = refuseChangedReleases(root);
      if (refused !== undefined) return refused;
    }
    if (command === "validate") {
      generateAll(root, version);
      process.stdout.write("the spec is valid\n");
      return 0;
    }
    if (command === "generate") {
      const files = generateAll(root, version);
      if (args.includes("--check")) {
        const drift = findDrift(root, files);
        const count = drift.changed.length + drift.missing.length + drift.stale.length;
        if (count === 0) {
          process.stdout.write(`generated files are up to date (${files.length} files)\n`);
          return 0;
        }
        for (const c of drift.changed) process.stdout.write(`${c.diff}\n`);
        for (const m of drift.missing) process.stdout.write(`missing: ${m}\n`);
        for (const s of drift.stale) process.stdout.write(`stale (no longer generated): ${s}\n`);
        process.stderr.write(`${count} generated file(s) out of date; run \`pnpm generate\`.\n`);
        return 1;
      }
      const { written, removed } = writeAll(root, files);
      process.stdout.write(`generated ${files.length} files (${written} written, ${removed} removed)\n`);
      return 0;
    }
    process.stderr.write(usage);
    return 2;
  } catch (error) {
    if (error instanceof SpecErrors) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

/** The repository root: the nearest folder upward that has spec/. */
function findRoot(from: string): string {
  let dir = from;
  for (;;) {
    try {
      readFileSync(join(dir, "spec", "spec.schema.json"));
      return dir;
    } catch {
      const up = dirname(dir);
      if (up === dir) return from;
      dir = up;
    }
  }
}

process.exitCode = main(process.argv);
