// diverge-spec bump and the frozen revisions: what a bump writes, what it refuses, and the check that
// fails when a released revision's YAML changes (against this repository, and on a temp copy).
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { bump, BumpError, checkReleased, freeze, hashSpecDir, readReleased } from "../src/bump.js";
import { buildIr } from "../src/ir.js";
import { loadSpecDir } from "../src/load.js";
import { repoRoot, removeTempDirs, tempDir } from "./fixtures/materialize.js";

afterAll(removeTempDirs);

const cli = join(repoRoot, "tools", "spec-compiler", "dist", "cli.js");

/** A temp root with spec/ as this repository has it. */
function specCopy(): string {
  const root = tempDir("diverge-bump-");
  cpSync(join(repoRoot, "spec"), join(root, "spec"), { recursive: true });
  return root;
}

describe("released revisions stay as released", () => {
  it("every revision in spec/released.json still has the YAML it was released with", () => {
    expect(checkReleased(repoRoot)).toEqual([]);
    for (const revision of Object.keys(readReleased(repoRoot).revisions)) expect(existsSync(join(repoRoot, "spec", revision))).toBe(true);
  });

  it("the frozen hash is the IR's source hash, the one every generated file's banner quotes", () => {
    const dir = join(repoRoot, "spec", "2.3.0");
    const ir = buildIr(loadSpecDir(dir, repoRoot), join(repoRoot, "spec", "spec.schema.json"));
    expect(hashSpecDir(dir).sha256).toBe(ir.sourceHash);
  });

  it("a changed, added or removed file of a frozen revision is named", () => {
    const root = specCopy();
    freeze(root, "2.3.0");
    expect(checkReleased(root)).toEqual([]);
    const frames = join(root, "spec", "2.3.0", "frames.yaml");
    writeFileSync(frames, readFileSync(frames, "utf8") + "\n# a comment is a change too\n");
    writeFileSync(join(root, "spec", "2.3.0", "extra.yaml"), "frames: []\n");
    const [problem, ...rest] = checkReleased(root);
    expect(rest).toEqual([]);
    expect(problem).toMatch(/^spec\/2\.3\.0 is a released revision and its YAML changed \(extra\.yaml was added, frames\.yaml changed\); released at sha256 [0-9a-f]{12}…, now [0-9a-f]{12}…\. Undo the edit and make it in a new revision: `diverge-spec bump 2\.3\.0 <next>`\.$/);
    expect(() => freeze(root, "2.3.0")).toThrow(/is a released revision and its YAML changed/);
  });

  it("generate and validate refuse to run over a changed released revision", () => {
    const root = specCopy();
    freeze(root, "2.3.0");
    const file = join(root, "spec", "2.3.0", "revision.yaml");
    writeFileSync(file, readFileSync(file, "utf8").replace("TCP port 14979", "TCP port 14980"));
    for (const command of ["generate", "validate"]) {
      const r = spawnSync(process.execPath, [cli, command, "--root", root], { encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("spec/2.3.0 is a released revision and its YAML changed (revision.yaml changed)");
    }
  });
});

describe("diverge-spec bump", () => {
  it("copies the revision with `revision:` and the title rewritten, and freezes the old one", () => {
    const root = specCopy();
    const result = bump(root, "2.3.0", "2.4.0");
    const names = readdirSync(join(root, "spec", "2.3.0")).sort();
    expect(readdirSync(join(root, "spec", "2.4.0")).sort()).toEqual(names);
    expect(result.files).toEqual(names.map((n) => `spec/2.4.0/${n}`));
    for (const name of names) {
      const before = readFileSync(join(root, "spec", "2.3.0", name), "utf8");
      const after = readFileSync(join(root, "spec", "2.4.0", name), "utf8");
      if (name !== "revision.yaml") expect(after, name).toBe(before);
    }
    const revision = readFileSync(join(root, "spec", "2.4.0", "revision.yaml"), "utf8");
    expect(revision).toMatch(/^revision: 2\.4\.0$/m);
    expect(revision).toMatch(/^title: .*revision 2\.4\.0$/m);
    expect(revision).not.toContain("2.3.0");
    const released = readReleased(root).revisions;
    expect(Object.keys(released)).toEqual(["2.3.0"]);
    expect(released["2.3.0"]!.sha256).toBe(result.frozenSha256);
    expect(checkReleased(root)).toEqual([]);
    // The new revision is a valid spec of its own.
    const ir = buildIr(loadSpecDir(join(root, "spec", "2.4.0"), root), join(root, "spec", "spec.schema.json"));
    expect(ir.revision).toBe("2.4.0");
  });

  it("refuses a target that exists, is not newer, or is not a revision, and a source that is missing", () => {
    const root = specCopy();
    const refuse = (from: string, to: string) => {
      try {
        bump(root, from, to);
      } catch (error) {
        expect(error).toBeInstanceOf(BumpError);
        return (error as Error).message;
      }
      throw new Error(`bump ${from} ${to} went through`);
    };
    expect(refuse("2.3.0", "2.3.0")).toBe("spec/2.3.0 already exists; pick a revision that does not.");
    expect(refuse("2.3.0", "2.2.9")).toBe("2.2.9 is not newer than 2.3.0; the new revision must be greater.");
    expect(refuse("2.3.0", "2.10")).toBe('"2.10" is not a revision: a revision is three numbers, like 2.4.0.');
    expect(refuse("9.9.9", "10.0.0")).toBe("there is no spec/9.9.9 to bump from.");
    bump(root, "2.3.0", "2.4.0");
    expect(refuse("2.3.0", "2.4.0")).toBe("spec/2.4.0 already exists; pick a revision that does not.");
    // Nothing was frozen or written by a refusal.
    expect(Object.keys(readReleased(root).revisions)).toEqual(["2.3.0"]);
    expect(existsSync(join(root, "spec", "2.2.9"))).toBe(false);
  });

  it("orders revisions by number, not by text: 2.10.0 is newer than 2.9.0", () => {
    const root = specCopy();
    bump(root, "2.3.0", "2.9.0");
    expect(() => bump(root, "2.9.0", "2.10.0")).not.toThrow();
    expect(Object.keys(readReleased(root).revisions)).toEqual(["2.3.0", "2.9.0"]);
  });

  it("the generator refuses a folder whose `revision:` says another revision", () => {
    const root = specCopy();
    cpSync(join(root, "spec", "2.3.0"), join(root, "spec", "2.4.0"), { recursive: true });
    const r = spawnSync(process.execPath, [cli, "validate", "--root", root], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("the folder spec/2.4.0 says `revision: 2.3.0`; a revision's folder and its `revision:` must agree.");
  });
});
