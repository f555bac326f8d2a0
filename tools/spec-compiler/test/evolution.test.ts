// The additive fixture, generated side by side with the revision it grows from and built: the new
// revision's decoder reads tag 9, the old one still refuses it with the 2.3.0 error text, and both
// are reachable as `@diverge/codec/<revision>` subpaths while the package root speaks the newest.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emitCodecPackageJson } from "../src/emit/root.js";
import type { IrRevision } from "../src/ir.js";
import { materialize, repoRoot } from "./fixtures/materialize.js";

const cli = join(repoRoot, "tools", "spec-compiler", "dist", "cli.js");
const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");

/** A temp repository with spec/2.3.0, the fixture as spec/2.4.0 and the codec's hand-written parts. */
function twoRevisions(): string {
  const root = mkdtempSync(join(tmpdir(), "diverge-evolution-"));
  cpSync(join(repoRoot, "spec", "spec.schema.json"), join(root, "spec", "spec.schema.json"));
  cpSync(join(repoRoot, "spec", "2.3.0"), join(root, "spec", "2.3.0"), { recursive: true });
  materialize("add-tag", join(root, "spec"));
  cpSync(join(repoRoot, "tsconfig.base.json"), join(root, "tsconfig.base.json"));
  const codec = join(root, "packages", "codec");
  mkdirSync(join(codec, "src"), { recursive: true });
  for (const part of ["package.json", "tsconfig.json", "tsconfig.build.json", "src/runtime", "src/mcp.ts"]) {
    cpSync(join(repoRoot, "packages", "codec", part), join(codec, part), { recursive: true });
  }
  // The codec's own dependencies (the MCP SDK's types), without installing anything.
  symlinkSync(join(repoRoot, "packages", "codec", "node_modules"), join(codec, "node_modules"), "dir");
  return root;
}

const probe = `
const bytes = (hex, text = "") => new Uint8Array([...Buffer.from(hex, "hex"), ...Buffer.from(text)]);
const out = {};
for (const spec of ["@diverge/codec/2.3.0", "@diverge/codec/2.4.0", "@diverge/codec"]) {
  const codec = await import(spec);
  const tries = {};
  for (const [name, input] of Object.entries({ tag9: bytes("09", "null"), tag8: bytes("08", "{}"), tag10: bytes("0a") })) {
    try {
      tries[name] = { value: codec.decodeToolsBeginChannelRequest(input) };
    } catch (error) {
      tries[name] = { variant: error.variant, message: error.message };
    }
  }
  out[spec] = { revision: codec.revision, revisions: codec.revisions, tags: codec.ToolsBeginChannelRequestTag, tries };
}
process.stdout.write(JSON.stringify(out));
`;

describe("an additive revision beside the one it grows from", () => {
  let root: string;
  let results: Record<string, { revision: string; revisions?: string[]; tags: Record<string, number>; tries: Record<string, { value?: unknown; variant?: string; message?: string }> }>;

  beforeAll(() => {
    root = twoRevisions();
    const generated = spawnSync(process.execPath, [cli, "generate", "--root", root], { encoding: "utf8" });
    expect(generated.stderr).toBe("");
    expect(generated.status).toBe(0);
    const codec = join(root, "packages", "codec");
    execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: codec, encoding: "utf8" });
    // Run from inside the package, so `@diverge/codec/…` resolves through its own exports map.
    writeFileSync(join(codec, "probe.mjs"), probe);
    results = JSON.parse(execFileSync(process.execPath, ["probe.mjs"], { cwd: codec, encoding: "utf8" }));
  });

  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  });

  it("generates both revisions side by side and exports each as a subpath", () => {
    const manifest = JSON.parse(readFileSync(join(root, "packages", "codec", "package.json"), "utf8")) as { exports: Record<string, unknown> };
    const subpaths = Object.keys(manifest.exports).filter((k) => /^\.\/\d/.test(k));
    expect(subpaths).toEqual(["./2.3.0", "./2.4.0"]);
    expect(manifest.exports["./2.4.0"]).toEqual({ types: "./dist/gen/2.4.0/index.d.ts", default: "./dist/gen/2.4.0/index.js" });
    expect(readFileSync(join(root, "packages", "codec", "src", "index.ts"), "utf8")).toContain('export * from "./gen/2.4.0/index.js";');
    const check = spawnSync(process.execPath, [cli, "generate", "--check", "--root", root], { encoding: "utf8" });
    expect(check.status, check.stdout).toBe(0);
  });

  it("the drift check catches an exports map out of step with the revisions", () => {
    const path = join(root, "packages", "codec", "package.json");
    const text = readFileSync(path, "utf8");
    const manifest = JSON.parse(text) as { exports: Record<string, unknown> };
    delete manifest.exports["./2.4.0"];
    writeFileSync(path, JSON.stringify(manifest, null, 2) + "\n");
    try {
      const check = spawnSync(process.execPath, [cli, "generate", "--check", "--root", root], { encoding: "utf8" });
      expect(check.status).toBe(1);
      expect(check.stdout).toContain("--- packages/codec/package.json (on disk)");
      expect(check.stdout).toContain('+    "./2.4.0": {');
    } finally {
      writeFileSync(path, text);
    }
  });

  it("the 2.4.0 decoder accepts tag 9", () => {
    const r = results["@diverge/codec/2.4.0"]!;
    expect(r.revision).toBe("2.4.0");
    expect(r.tags.McpListPrompts).toBe(9);
    expect(r.tries.tag9).toEqual({ value: { variant: "McpListPrompts", params: null } });
    expect(r.tries.tag10).toEqual({ variant: "UnknownTag", message: "unknown tools begin channel request tag 10" });
  });

  it("the 2.3.0 decoder still reports tag 9 as unknown, word for word", () => {
    const r = results["@diverge/codec/2.3.0"]!;
    expect(r.revision).toBe("2.3.0");
    expect(r.tags.McpListPrompts).toBeUndefined();
    expect(r.tries.tag9).toEqual({ variant: "UnknownTag", message: "unknown tools begin channel request tag 9" });
  });

  it("both read what they share alike, and the package root is the newest revision", () => {
    expect(results["@diverge/codec/2.3.0"]!.tries.tag8).toEqual({ value: { variant: "Secrets", values: {} } });
    expect(results["@diverge/codec/2.4.0"]!.tries.tag8).toEqual(results["@diverge/codec/2.3.0"]!.tries.tag8);
    const rootExport = results["@diverge/codec"]!;
    expect(rootExport.revision).toBe("2.4.0");
    expect(rootExport.revisions).toEqual(["2.3.0", "2.4.0"]);
  });
});

describe("the exports map is rewritten in place", () => {
  const ir = (revision: string) => ({ revision }) as unknown as IrRevision;
  const manifest = [
    "{",
    '  "name": "@diverge/codec",',
    '  "files": ["dist", "README.md"],',
    '  "exports": {',
    '    ".": { "types": "./dist/index.d.ts", "default": "./dist/index.js" },',
    '    "./2.2.0": { "types": "./dist/gen/2.2.0/index.d.ts", "default": "./dist/gen/2.2.0/index.js" },',
    '    "./mcp": "./dist/mcp.js"',
    "  },",
    '  "peerDependenciesMeta": { "x": { "optional": true } }',
    "}",
    "",
  ].join("\n");

  it("replaces the revision subpaths, keeps every other key where it was, and touches nothing else", () => {
    const out = emitCodecPackageJson(manifest, [ir("2.3.0"), ir("2.4.0")]).text;
    const parsed = JSON.parse(out) as { exports: Record<string, unknown> };
    expect(Object.keys(parsed.exports)).toEqual([".", "./2.3.0", "./2.4.0", "./mcp"]);
    expect(out.startsWith('{\n  "name": "@diverge/codec",\n  "files": ["dist", "README.md"],\n  "exports": {\n    ".": {\n')).toBe(true);
    expect(out.endsWith('  },\n  "peerDependenciesMeta": { "x": { "optional": true } }\n}\n')).toBe(true);
  });

  it("leaves the text as it is when the map already is right", () => {
    const once = emitCodecPackageJson(manifest, [ir("2.3.0")]).text;
    expect(emitCodecPackageJson(once, [ir("2.3.0")]).text).toBe(once);
    const current = readFileSync(join(repoRoot, "packages", "codec", "package.json"), "utf8");
    const revisions = readdirSync(join(repoRoot, "spec")).filter((n) => /^\d+\.\d+\.\d+$/.test(n)).sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    expect(emitCodecPackageJson(current, revisions.map(ir)).text).toBe(current);
  });
});
