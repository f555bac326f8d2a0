// The runtime dependencies are ranges, not pins: a consumer already on another version of the MCP
// SDK, zod or ws gets one copy. This installs the runtime tarballs (every public package but the
// build tool @diverge/spec-compiler, which writes the SDK's declarations out and so pins the SDK it
// reads) in two more fresh projects, one with the
// lowest version each range allows (and without optional dependencies, so `ws` runs without
// bufferutil, its pure-JavaScript fallback) and one with the newest, and in each type-checks the
// consumer's TypeScript (project/runtime.ts, skipLibCheck off) and runs a client against a server over loopback.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";
import { packageRoot, publicPackages, workspacePath } from "./packages.js";

const { tarballs } = inject("consumer");

/** The ranged runtime dependencies, the lowest version each range allows, and the range itself. */
const RANGED = ["@modelcontextprotocol/sdk", "zod", "ws"] as const;
const LOWEST: Record<(typeof RANGED)[number], string> = { "@modelcontextprotocol/sdk": "1.25.0", zod: "3.25.76", ws: "8.18.0" };

function manifest(dir: string): { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(workspacePath(dir, "package.json"), "utf8"));
}

/** The runtime packages: every public one but the build tool. */
const runtimePackages = publicPackages.filter((p) => p.name !== "@diverge/spec-compiler");

/** The one range the runtime packages give each ranged dependency (they must agree). */
function rangeOf(name: string): string {
  const ranges = new Set(runtimePackages.flatMap((p) => (manifest(p.dir).dependencies?.[name] ? [manifest(p.dir).dependencies![name]!] : [])));
  expect([...ranges], name).toHaveLength(1);
  return [...ranges][0]!;
}

function run(command: string, args: readonly string[], cwd: string) {
  return spawnSync(command, args, { cwd, env: cleanEnv(), encoding: "utf8", timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
}

const roots: string[] = [];
afterAll(() => {
  if (!process.env.DIVERGE_KEEP_CONSUMER) for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function project(versions: Record<string, string>, npmFlags: string[]): string {
  const root = mkdtempSync(join(tmpdir(), "diverge-ranges-"));
  roots.push(root);
  cpSync(join(packageRoot, "project"), root, { recursive: true });
  writeFileSync(join(root, "package.json"), `${JSON.stringify({ name: "diverge-ranges", version: "0.0.0", private: true, type: "module" })}\n`);
  const extras = Object.entries(versions).map(([name, version]) => `${name}@${version}`);
  const installed = run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...npmFlags, ...runtimePackages.map((p) => tarballs[p.name]!), ...extras, "typescript@5.9.3", "@types/node@20.19.9"], root);
  expect(installed.status, installed.stderr).toBe(0);
  return root;
}

function versionIn(root: string, name: string): string {
  return (JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;
}

function checks(root: string): void {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const typed = run(process.execPath, [tsc, "-p", "tsconfig.runtime.json"], root);
  expect(typed.stdout + typed.stderr).toBe("");
  const loop = run(process.execPath, ["loopback.mjs"], root);
  expect(loop.stderr).toBe("");
  expect(loop.status).toBe(0);
  expect(JSON.parse(loop.stdout).called).toEqual({ content: [{ type: "text", text: "5" }] });
  // One copy of each ranged dependency: the consumer's, shared with the packages.
  for (const name of RANGED) {
    const listed = run("npm", ["ls", name, "--all", "--parseable"], root);
    expect(new Set(listed.stdout.trim().split("\n")), name).toEqual(new Set([join(root, "node_modules", name)]));
  }
}

describe("the runtime dependencies are ranges", () => {
  it("ranges @modelcontextprotocol/sdk, zod and ws, and makes bufferutil optional", () => {
    for (const name of RANGED) expect(rangeOf(name), name).toMatch(/^\^/);
    for (const pkg of runtimePackages) {
      const { dependencies = {}, optionalDependencies = {} } = manifest(pkg.dir);
      expect(dependencies.bufferutil, pkg.name).toBeUndefined();
      if (optionalDependencies.bufferutil) expect(optionalDependencies.bufferutil).toMatch(/^\^/);
    }
  });

  it("works with the lowest version of each range, and without bufferutil (ws's fallback)", { timeout: 600_000 }, () => {
    const root = project(LOWEST, ["--omit=optional"]);
    for (const name of RANGED) expect(versionIn(root, name), name).toBe(LOWEST[name]);
    expect(existsSync(join(root, "node_modules", "bufferutil"))).toBe(false);
    checks(root);
  });

  it("works with the newest version each range allows", { timeout: 600_000 }, () => {
    const newest = Object.fromEntries(RANGED.map((name) => [name, rangeOf(name)]));
    const root = project(newest, []);
    checks(root);
  });
});
