// End to end, on a temporary copy of the repository (the files git sees; node_modules linked, not
// reinstalled): bump 2.3.0 → 2.4.0, edit the new revision, generate, write the changeset, build the
// codec and the conformance testee, run the generated tests of both revisions, and let
// `changeset status` judge the branch. Then the two ways a bump goes wrong: a forbidden edit and an
// edit of the frozen revision.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyEdits, readFixture, repoRoot } from "./fixtures/materialize.js";
import { copyRepository, run } from "./repo-copy.js";

const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
const vitest = join(repoRoot, "node_modules", "vitest", "vitest.mjs");
const changeset = join(repoRoot, "node_modules", "@changesets", "cli", "bin.js");

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false", ...args], { cwd, encoding: "utf8" });
}

describe("bump → edit → generate → changeset → build → test, on a copy of the repository", () => {
  let root: string;
  const spec = (...args: string[]) => run(root, [join(root, "tools", "spec-compiler", "dist", "cli.js"), ...args]);

  beforeAll(() => {
    root = copyRepository();
    git(root, "init", "-q", "-b", "main");
    writeFileSync(join(root, ".git", "info", "exclude"), "node_modules\ndist\n");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "the repository as copied");
    git(root, "checkout", "-q", "-b", "spec-2.4.0");
    const built = run(join(root, "tools", "spec-compiler"), [tsc, "-p", "tsconfig.build.json"]);
    expect(built.out).toBe("");
  });

  // The copy is removed afterwards (its node_modules are links, and only the links go);
  // DIVERGE_KEEP_E2E=1 keeps it, and says where, to look at.
  afterAll(() => {
    if (!root) return;
    if (process.env.DIVERGE_KEEP_E2E) process.stdout.write(`kept the copy at ${root}\n`);
    else rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  });

  it("bump 2.3.0 2.4.0 copies the revision, freezes 2.3.0 and regenerates", () => {
    const bumped = spec("bump", "2.3.0", "2.4.0");
    expect(bumped.stderr).toBe("");
    expect(bumped.status).toBe(0);
    expect(bumped.stdout).toContain("spec/2.4.0/ is a copy of spec/2.3.0/");
    expect(readFileSync(join(root, "spec", "2.4.0", "revision.yaml"), "utf8")).toMatch(/^revision: 2\.4\.0$/m);
    const released = JSON.parse(readFileSync(join(root, "spec", "released.json"), "utf8")) as { revisions: Record<string, { sha256: string }> };
    expect(Object.keys(released.revisions)).toContain("2.3.0");
    // The frozen hash is the one stamped in every generated file of 2.3.0.
    expect(readFileSync(join(root, "packages", "codec", "src", "gen", "2.3.0", "index.ts"), "utf8")).toContain(`spec sha256 ${released.revisions["2.3.0"]!.sha256}`);
    expect(existsSync(join(root, "packages", "codec", "src", "gen", "2.4.0", "index.ts"))).toBe(true);
    expect(spec("bump", "2.3.0", "2.4.0").stderr).toContain("spec/2.4.0 already exists");
  });

  it("the edited revision generates, and generate --check agrees", () => {
    applyEdits(join(root, "spec", "2.4.0"), readFixture("add-tag"));
    const generated = spec("generate");
    expect(generated.stderr).toBe("");
    expect(generated.status).toBe(0);
    const check = spec("generate", "--check");
    expect(check.status, check.out).toBe(0);
    const manifest = JSON.parse(readFileSync(join(root, "packages", "codec", "package.json"), "utf8")) as { exports: Record<string, unknown> };
    expect(Object.keys(manifest.exports).filter((k) => /^\.\/\d/.test(k))).toEqual(["./2.3.0", "./2.4.0"]);
  });

  it("changeset status and changeset --check fail the branch before the changeset is written", () => {
    const pending = spec("changeset", "--check");
    expect(pending.status).toBe(1);
    expect(pending.stderr).toContain("spec/2.4.0 is newer than the packages (2.3.0) and .changeset/spec-2.4.0.md is missing");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "spec 2.4.0");
    const status = run(root, [changeset, "status", "--since=main"]);
    expect(status.status, status.out).not.toBe(0);
  });

  it("diff --changeset classifies the change and writes the changeset of the fixed group", () => {
    const diff = spec("diff", "2.3.0", "2.4.0", "--changeset");
    expect(diff.stderr).toBe("");
    expect(diff.status).toBe(0);
    expect(diff.stdout).toContain("tools-begin/client/channel-request: new tag 9 (McpListPrompts).");
    expect(diff.stdout).toContain("wrote .changeset/spec-2.4.0.md");
    const text = readFileSync(join(root, ".changeset", "spec-2.4.0.md"), "utf8");
    const publicNames = ["packages", "tools"].flatMap((parent) =>
      readdirSync(join(root, parent))
        .map((name) => join(root, parent, name, "package.json"))
        .filter((p) => existsSync(p))
        .map((p) => JSON.parse(readFileSync(p, "utf8")) as { name: string; private?: boolean })
        .filter((p) => !p.private && p.name.startsWith("@diverge/"))
        .map((p) => p.name),
    );
    expect(publicNames).toContain("@diverge/codec");
    const header = text.split("---")[1]!.trim().split("\n");
    expect(header.sort()).toEqual(publicNames.map((n) => `"${n}": minor`).sort());
    expect(text).toContain("Tags and kinds:");
    expect(text).toContain("- additive: tools-begin/client/channel-request: new tag 9 (McpListPrompts).");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "changeset");
    expect(spec("changeset", "--check").stdout).toContain(".changeset/spec-2.4.0.md takes the packages from 2.3.0 to 2.4.0 (minor), implementing 2.4.0.");
    const status = run(root, [changeset, "status", "--since=main", "--verbose"]);
    expect(status.status, status.out).toBe(0);
    expect(status.out).toContain("@diverge/codec");
  });

  it("the codec and the conformance testee build with both revisions", () => {
    const codec = run(join(root, "packages", "codec"), [tsc, "-p", "tsconfig.build.json"]);
    expect(codec.out).toBe("");
    const conformance = run(join(root, "packages", "conformance"), [tsc, "-p", "tsconfig.build.json"]);
    expect(conformance.out).toBe("");
    const registry = readFileSync(join(root, "packages", "conformance", "src", "gen", "registry.ts"), "utf8");
    expect(registry).toContain('from "@diverge/codec/2.4.0"');
  });

  it("the generated tests and the conformance vectors of both revisions pass", () => {
    const tests = run(join(root, "packages", "codec"), [vitest, "run", "test/gen/2.3.0", "test/gen/2.4.0"]);
    expect(tests.status, tests.out.slice(-3000)).toBe(0);
    expect(tests.out).toContain("test/gen/2.4.0/tools-begin/client/channel-request.test.ts");
    expect(tests.out).toContain("test/gen/2.3.0/tools-begin/client/channel-request.test.ts");
    // The conformance testee answers both revisions' vectors, 2.4.0's tag 9 and 2.3.0's refusal of it.
    const vectors = readFileSync(join(root, "packages", "conformance", "vectors", "2.4.0.jsonl"), "utf8");
    expect(vectors).toContain('"name":"tools-begin/client/channel-request: decodes list prompts without params"');
    expect(readFileSync(join(root, "packages", "conformance", "vectors", "2.3.0.jsonl"), "utf8")).toContain("unknown tools begin channel request tag 9");
    const conformance = run(join(root, "packages", "conformance"), [vitest, "run", "--reporter=verbose"]);
    expect(conformance.status, conformance.out.slice(-3000)).toBe(0);
    expect(conformance.out).toContain("diverge-conformance over vectors/2.4.0.jsonl > tools-begin/client/channel-request: decodes list prompts without params");
  });

  it("changeset version lands every public package on 2.4.0, and the spec is in step again", () => {
    const versioned = run(root, [changeset, "version"]);
    expect(versioned.status, versioned.out).toBe(0);
    expect(existsSync(join(root, ".changeset", "spec-2.4.0.md"))).toBe(false);
    const codec = JSON.parse(readFileSync(join(root, "packages", "codec", "package.json"), "utf8")) as { version: string };
    expect(codec.version).toBe("2.4.0");
    expect(readFileSync(join(root, "packages", "codec", "CHANGELOG.md"), "utf8")).toContain("new tag 9 (McpListPrompts)");
    const pending = spec("changeset", "--check");
    expect(pending.stderr).toBe("");
    expect(pending.stdout).toContain("the packages (2.4.0) implement the newest revision, 2.4.0");
    // Generated banners quote the compiler's version, which moved with the group: regenerate.
    expect(spec("generate").status).toBe(0);
    expect(spec("generate", "--check").status).toBe(0);
  });

  it("a forbidden edit fails the diff with the frame, the tag and both meanings", () => {
    applyEdits(join(root, "spec", "2.4.0"), readFixture("reuse-tag"));
    const diff = spec("diff", "2.3.0", "2.4.0", "--changeset");
    expect(diff.status).toBe(1);
    expect(diff.stderr).toContain("forbidden: tools-begin/client/channel-request: tag 8 meant Secrets in 2.3.0 and means Vault in 2.4.0");
    expect(diff.stderr).toContain("no changeset written.");
  });

  it("an edit of the frozen revision stops generate", () => {
    const file = join(root, "spec", "2.3.0", "frames.yaml");
    writeFileSync(file, readFileSync(file, "utf8").replace("so not even the header.", "so not even a header."));
    const generated = spec("generate");
    expect(generated.status).toBe(1);
    expect(generated.stderr).toContain("spec/2.3.0 is a released revision and its YAML changed (frames.yaml changed)");
    expect(spec("bump", "2.3.0", "2.5.0").stderr).toContain("spec/2.3.0 is a released revision");
  });
});

