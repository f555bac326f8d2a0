// The commands of a spec bump: bump, diff (with --changeset), changeset, freeze; and the frozen-
// revision check `generate` and `validate` run first.
import { bump, BumpError, checkReleased, freeze, RELEASED_FILE } from "./bump.js";
import { checkPendingChangeset, writeChangeset } from "./changeset.js";
import { diffRevisions, formatEvolution, loadRevisionArg } from "./diff.js";
import { generateAll, listRevisions, writeAll } from "./generate.js";

export const evolutionUsage = `  diverge-spec bump <from> <to> [--root DIR]    start revision <to> as a copy of <from>, freeze <from>
                                                 (${RELEASED_FILE}) and regenerate
  diverge-spec diff <a> <b> [--json] [--changeset] [--root DIR]
                                                 classify every change from <a> to <b> (revisions under
                                                 spec/, or spec folders): forbidden, breaking, additive,
                                                 editorial; exit 1 on a forbidden change. --changeset:
                                                 also write .changeset/spec-<b>.md
  diverge-spec changeset <a> <b> [--root DIR]    the same as diff <a> <b> --changeset
  diverge-spec changeset --check [--root DIR]    exit 1 when the newest revision is newer than the
                                                 packages and .changeset/spec-<it>.md is missing or
                                                 not the bump its diff needs (for CI)
  diverge-spec freeze <revision> [--root DIR]    record <revision> as released in ${RELEASED_FILE}
`;

/** Exit 1 with every sentence when a released revision's YAML changed; undefined when all is well. */
export function refuseChangedReleases(root: string): number | undefined {
  const problems = checkReleased(root);
  if (problems.length === 0) return undefined;
  for (const p of problems) process.stderr.write(`${p}\n`);
  return 1;
}

/** Runs one of the commands above; undefined when `command` is none of them. */
export function runEvolutionCommand(command: string | undefined, args: readonly string[], root: string, version: string): number | undefined {
  const positional = args.slice(1).filter((a, i, all) => !a.startsWith("--") && all[i - 1] !== "--root");
  try {
    if (command === "bump") {
      const [from, to] = positional;
      if (!from || !to) return usageError("bump <from> <to>");
      const result = bump(root, from, to);
      const files = generateAll(root, version);
      const { written, removed } = writeAll(root, files);
      process.stdout.write(
        `spec/${to}/ is a copy of spec/${from}/ (${result.files.length} files); ${from} is frozen in ${RELEASED_FILE} (sha256 ${result.frozenSha256.slice(0, 12)}…).\n` +
          `generated ${files.length} files (${written} written, ${removed} removed).\n` +
          `Next: edit spec/${to}/*.yaml, run \`pnpm generate\`, then \`diverge-spec diff ${from} ${to} --changeset\`.\n`,
      );
      return 0;
    }
    if (command === "freeze") {
      const [revision] = positional;
      if (!revision) return usageError("freeze <revision>");
      const sha = freeze(root, revision);
      process.stdout.write(`spec/${revision} is released (sha256 ${sha.slice(0, 12)}…) in ${RELEASED_FILE}.\n`);
      return 0;
    }
    if (command === "changeset" && args.includes("--check") && positional.length === 0) {
      const revisions = listRevisions(root);
      const { problems, note } = checkPendingChangeset(root, revisions, (a, b) => diffRevisions(loadRevisionArg(root, a), loadRevisionArg(root, b)));
      for (const p of problems) process.stderr.write(`${p}\n`);
      if (note) process.stdout.write(`${note}\n`);
      return problems.length === 0 ? 0 : 1;
    }
    if (command === "diff" || command === "changeset") {
      const [a, b] = positional;
      if (!a || !b) return usageError(`${command} <a> <b>`);
      const evolution = diffRevisions(loadRevisionArg(root, a), loadRevisionArg(root, b));
      const wantChangeset = command === "changeset" || args.includes("--changeset");
      let written: { path: string; warnings: string[] } | undefined;
      if (wantChangeset && evolution.ok) written = writeChangeset(root, evolution);
      if (args.includes("--json")) {
        process.stdout.write(JSON.stringify({ ...evolution, changeset: written?.path }, null, 2) + "\n");
      } else {
        process.stdout.write(formatEvolution(evolution));
        if (written) process.stdout.write(`wrote ${written.path}\n`);
      }
      for (const w of written?.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
      if (!evolution.ok) {
        for (const c of evolution.changes.filter((x) => x.class === "forbidden")) process.stderr.write(`forbidden: ${c.sentence}\n`);
        for (const p of evolution.problems) process.stderr.write(`problem: ${p}\n`);
        if (wantChangeset) process.stderr.write("no changeset written.\n");
        return 1;
      }
      return 0;
    }
  } catch (error) {
    if (error instanceof BumpError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    if (error instanceof Error && !("errors" in error) && /^there is no spec|is neither a revision/.test(error.message)) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }
  return undefined;
}

function usageError(what: string): number {
  process.stderr.write(`usage: diverge-spec ${what}\n`);
  return 2;
}
