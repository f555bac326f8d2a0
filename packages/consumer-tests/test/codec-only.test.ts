// @diverge/codec alone: a fresh project that installs only the codec's tarball (and TypeScript)
// type-checks a program using MCP-typed fields with skipLibCheck off. The codec's declarations may
// not need the MCP SDK (its optional peer, for `@diverge/codec/mcp` only), and those fields stay
// exact: see project-codec-only/typecheck.ts.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";
import { packageRoot } from "./packages.js";

const { tarballs } = inject("consumer");
let root: string;
let project: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "diverge-codec-only-"));
  project = join(root, "project");
  cpSync(join(packageRoot, "project-codec-only"), project, { recursive: true });
  writeFileSync(join(project, "package.json"), `${JSON.stringify({ name: "codec-only", version: "0.0.0", private: true, type: "module" }, null, 2)}\n`);
  const install = spawnSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefer-offline", "--save-exact", tarballs["@diverge/codec"]!, "typescript@5.9.3"], {
    cwd: project,
    env: cleanEnv(),
    encoding: "utf8",
  });
  if (install.status !== 0) throw new Error(`npm install failed:\n${install.stdout}\n${install.stderr}`);
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

function tsc(...args: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [join(project, "node_modules", "typescript", "bin", "tsc"), ...args], { cwd: project, env: cleanEnv(), encoding: "utf8" });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("a project with only @diverge/codec", () => {
  it("has no MCP SDK, zod or @types/node installed", () => {
    expect(existsSync(join(project, "node_modules", "@diverge", "codec", "package.json"))).toBe(true);
    expect(existsSync(join(project, "node_modules", "@modelcontextprotocol"))).toBe(false);
    expect(existsSync(join(project, "node_modules", "zod"))).toBe(false);
    expect(existsSync(join(project, "node_modules", "@types", "node"))).toBe(false);
  });

  it("type-checks a program using MCP-typed fields with skipLibCheck off, each deliberate error caught", () => {
    const { status, output } = tsc("-p", "tsconfig.json");
    expect(output).toBe("");
    expect(status).toBe(0);
  });

  it("reports a real type error in an MCP-typed field", () => {
    writeFileSync(join(project, "broken.ts"), 'import type { CallToolRequestParams } from "@diverge/codec";\nexport const p: CallToolRequestParams = { name: 42 };\n');
    const { status, output } = tsc("--noEmit", "--strict", "--skipLibCheck", "false", "--module", "nodenext", "--moduleResolution", "nodenext", "broken.ts");
    expect(output).toMatch(/broken\.ts\(2,\d+\): error TS2322: Type 'number' is not assignable to type 'string'/);
    expect(status).not.toBe(0);
  });
});
