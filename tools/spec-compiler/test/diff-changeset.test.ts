// The changeset written from a diff: every public @diverge/* package with the bump the changes need,
// and a summary grouped by tags and kinds, exchanges, frames and errors.
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkPendingChangeset, publicPackages, renderChangeset, writeChangeset } from "../src/changeset.js";
import { diffRevisions, loadRevisionArg, type Evolution } from "../src/diff.js";
import { materialize, repoRoot, removeTempDirs, tempDir } from "./fixtures/materialize.js";

afterAll(removeTempDirs);

const additive = () => diffRevisions(loadRevisionArg(repoRoot, "2.3.0"), loadRevisionArg(repoRoot, materialize("add-tag")));

describe("the changeset of a spec bump", () => {
  it("names every public @diverge/* package of the workspace and no private one", () => {
    const names = publicPackages(repoRoot).map((p) => p.name);
    expect(names).toContain("@diverge/codec");
    expect(names).toContain("@diverge/spec-compiler");
    expect(names).not.toContain("@diverge/demo");
    expect(names).not.toContain("@diverge/example-agent");
    // The guide's container is published, so a provider can try a container in one command.
    expect(names).toContain("@diverge/example-container");
    expect(names).toEqual([...names].sort());
  });

  it("gives the additive fixture a minor bump and lists the new tag", () => {
    const packages = [
      { name: "@diverge/client", version: "2.3.0", dir: "packages/client" },
      { name: "@diverge/codec", version: "2.3.0", dir: "packages/codec" },
    ];
    expect(renderChangeset(additive(), packages)).toBe(
      [
        "---",
        '"@diverge/client": minor',
        '"@diverge/codec": minor',
        "---",
        "",
        "Implements spec revision 2.4.0 (from 2.3.0): 2 additive changes, 1 editorial change. The package root speaks 2.4.0; `@diverge/codec/2.3.0` still speaks 2.3.0.",
        "",
        "Tags and kinds:",
        "",
        "- additive: tools-begin/client/channel-request: new tag 9 (McpListPrompts).",
        "",
        "Frames:",
        "",
        "- additive: tools-begin/channels: channel 9 the provider opens is described (mcp/list-tools/answer, one, a bare finish means notServed).",
        "",
        "Editorial (docs, rules, examples):",
        "",
        "- tools-begin/client/channel-request: examples (2 added, 1 removed) changed.",
        "",
      ].join("\n"),
    );
  });

  it("is refused for a forbidden change", () => {
    const e = diffRevisions(loadRevisionArg(repoRoot, "2.3.0"), loadRevisionArg(repoRoot, materialize("error-text")));
    expect(() => renderChangeset(e, publicPackages(repoRoot))).toThrow("no changeset for 2.3.0 → 2.4.0: the diff fails");
  });

  it("is written to .changeset/spec-<to>.md, with a warning for a package not at the old revision", () => {
    const root = tempDir("diverge-changeset-");
    cpSync(join(repoRoot, "pnpm-workspace.yaml"), join(root, "pnpm-workspace.yaml"));
    const manifest = (dir: string, body: object) => {
      mkdirSync(join(root, dir), { recursive: true });
      writeFileSync(join(root, dir, "package.json"), JSON.stringify(body));
    };
    manifest("packages/codec", { name: "@diverge/codec", version: "2.3.0" });
    manifest("packages/late", { name: "@diverge/late", version: "2.2.0" });
    manifest("packages/demo", { name: "@diverge/demo", version: "2.3.0", private: true });
    manifest("packages/other", { name: "left-pad", version: "1.0.0" });
    manifest("tools/spec-compiler", { name: "@diverge/spec-compiler", version: "2.3.0" });
    const { path, warnings } = writeChangeset(root, additive());
    expect(path).toBe(".changeset/spec-2.4.0.md");
    const text = readFileSync(join(root, path), "utf8");
    expect(text.startsWith('---\n"@diverge/codec": minor\n"@diverge/late": minor\n"@diverge/spec-compiler": minor\n---\n')).toBe(true);
    expect(warnings).toEqual(["@diverge/late is at 2.2.0: after `changeset version` it will be at 2.3.0, not 2.4.0."]);
  });
});

describe("changeset --check: a revision newer than the packages has its changeset", () => {
  function workspace(version: string): string {
    const root = tempDir("diverge-pending-");
    writeFileSync(join(root, "pnpm-workspace.yaml"), 'packages:\n  - "packages/*"\n');
    for (const name of ["codec", "server"]) {
      mkdirSync(join(root, "packages", name), { recursive: true });
      writeFileSync(join(root, "packages", name, "package.json"), JSON.stringify({ name: `@diverge/${name}`, version }));
    }
    mkdirSync(join(root, ".changeset"));
    return root;
  }
  const minor = (a: string, b: string): Evolution => ({ from: a, to: b, changes: [], level: "additive", needs: "minor", step: "minor", bump: "minor", problems: [], ok: true });

  it("has nothing to say when the packages implement the newest revision", () => {
    expect(checkPendingChangeset(workspace("2.3.0"), ["2.3.0"], minor)).toEqual({ problems: [], note: "the packages (2.3.0) implement the newest revision, 2.3.0; no spec changeset is pending." });
  });

  it("asks for the changeset of a new revision, then checks its bumps", () => {
    const root = workspace("2.3.0");
    expect(checkPendingChangeset(root, ["2.3.0", "2.4.0"], minor).problems).toEqual([
      "spec/2.4.0 is newer than the packages (2.3.0) and .changeset/spec-2.4.0.md is missing: run `pnpm spec diff 2.3.0 2.4.0 --changeset`.",
    ]);
    writeFileSync(join(root, ".changeset", "spec-2.4.0.md"), '---\n"@diverge/codec": minor\n"@diverge/server": patch\n---\n\nText.\n');
    expect(checkPendingChangeset(root, ["2.3.0", "2.4.0"], minor).problems).toEqual([
      ".changeset/spec-2.4.0.md gives @diverge/server a patch bump; 2.3.0 → 2.4.0 needs minor: rerun `pnpm spec diff 2.3.0 2.4.0 --changeset`.",
    ]);
    writeChangeset(root, minor("2.3.0", "2.4.0"));
    expect(checkPendingChangeset(root, ["2.3.0", "2.4.0"], minor)).toEqual({ problems: [], note: ".changeset/spec-2.4.0.md takes the packages from 2.3.0 to 2.4.0 (minor), implementing 2.4.0." });
  });

  it("lets the patch number run ahead of the revision, for fixes released without a spec change", () => {
    const root = workspace("2.3.2");
    writeChangeset(root, minor("2.3.0", "2.4.0"));
    expect(checkPendingChangeset(root, ["2.3.0", "2.4.0"], minor).problems).toEqual([]);
    expect(checkPendingChangeset(workspace("2.3.2"), ["2.3.0"], minor).problems).toEqual([]);
  });

  it("refuses a changeset that would land the packages on another version than the revision", () => {
    const root = workspace("2.3.0");
    writeChangeset(root, minor("2.3.0", "2.5.0"));
    expect(checkPendingChangeset(root, ["2.3.0", "2.5.0"], minor).problems).toEqual([
      ".changeset/spec-2.5.0.md takes the packages from 2.3.0 to 2.4.0, not to 2.5.0: versions follow the spec revision, so name the revision 2.4.0 or release the packages at 2.3.0 first.",
    ]);
  });

  it("refuses a hand-written changeset larger than a patch: the major and minor numbers are the revision's", () => {
    const root = workspace("2.3.0");
    writeFileSync(join(root, ".changeset", "fix.md"), '---\n"@diverge/codec": patch\n"@diverge/server": minor\n---\n\nText.\n');
    expect(checkPendingChangeset(root, ["2.3.0"], minor).problems).toEqual([
      ".changeset/fix.md gives @diverge/server a minor bump; versions follow the spec revision, so a change without a spec bump is a patch (a new revision and `pnpm spec diff --changeset` bring minor and major bumps).",
    ]);
    writeFileSync(join(root, ".changeset", "fix.md"), '---\n"@diverge/codec": patch\n"@diverge/server": patch\n---\n\nText.\n');
    expect(checkPendingChangeset(root, ["2.3.0"], minor).problems).toEqual([]);
  });

  it("says so when the fixed group is not at one version", () => {
    const root = workspace("2.3.0");
    writeFileSync(join(root, "packages", "server", "package.json"), JSON.stringify({ name: "@diverge/server", version: "2.3.1" }));
    expect(checkPendingChangeset(root, ["2.3.0"], minor).problems[0]).toMatch(/^the @diverge\/\* packages are released together but are at 2\.3\.0, 2\.3\.1/);
  });
});
