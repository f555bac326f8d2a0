// The installed tarballs from a consumer's side, in Node: TypeScript under both module resolutions
// a consumer is likely to use, the seed vectors through the codec, and every binary.
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { cleanEnv, typescripts } from "./global-setup.js";
import { publicPackages, workspacePath } from "./packages.js";

const { project, tsc } = inject("consumer");

function run(command: string, args: readonly string[]) {
  return spawnSync(command, args, { cwd: project, env: cleanEnv(), encoding: "utf8", timeout: 120_000 });
}

/** Every entry every public package exports (`@diverge/codec/mcp`, …), imported, so each .d.ts is checked. */
function writeEntries(): string[] {
  const specifiers = publicPackages.flatMap((pkg) => {
    const manifest = JSON.parse(readFileSync(join(project, "node_modules", ...pkg.name.split("/"), "package.json"), "utf8")) as { exports?: Record<string, unknown> };
    return Object.keys(manifest.exports ?? { ".": null })
      .filter((key) => key !== "./package.json" && !key.includes("*"))
      .map((key) => `${pkg.name}${key.slice(1)}`);
  });
  writeFileSync(join(project, "entries.ts"), `// Every entry of every public package.\n${specifiers.map((s, i) => `import * as entry${i} from "${s}";\nvoid entry${i};\n`).join("")}export {};\n`);
  return specifiers;
}

// Every check at once: each is a whole tsc run over every declaration file installed.
describe.concurrent("TypeScript against the installed packages", () => {
  const entries = writeEntries();
  it("imports every entry of every public package", () => {
    expect(entries).toContain("@diverge/multiplexer/ops");
    expect(entries).toContain("@diverge/codec/exchanges");
  });
  for (const version of ["5.9", "7"] as const) {
    for (const resolution of ["nodenext", "bundler"]) {
      it(`type-checks under TypeScript ${version} (${typescripts[version]}), moduleResolution ${resolution}, with skipLibCheck off`, async () => {
        const output = await promisify(execFile)(process.execPath, [tsc[version], "-p", `tsconfig.${resolution}.json`], { cwd: project, env: cleanEnv() }).then(
          ({ stdout, stderr }) => stdout + stderr,
          (error: { stdout?: string; stderr?: string; message: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}` || error.message,
        );
        expect(output).toBe("");
      });
    }
  }
});

describe("the seed vectors through the installed @diverge/codec, in Node", () => {
  it("ships the vectors of the workspace in @diverge/conformance", () => {
    expect(readFileSync(join(project, "node_modules", "@diverge", "conformance", "vectors", "2.3.0.jsonl"), "utf8")).toBe(
      readFileSync(workspacePath("packages", "conformance", "vectors", "2.3.0.jsonl"), "utf8"),
    );
  });

  it("installs one copy of the codec, at the top level", () => {
    const result = run("npm", ["ls", "@diverge/codec", "--all", "--parseable"]);
    expect(result.status).toBe(0);
    expect(result.stdout.trim().split("\n")).toEqual([join(project, "node_modules", "@diverge", "codec")]);
  });

  it("decodes and encodes every vector as it expects", () => {
    const result = run(process.execPath, ["node-vectors.mjs"]);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    const report = JSON.parse(result.stdout) as { total: number; passed: number; decoded: number; encoded: number; failures: unknown[] };
    expect(report.failures).toEqual([]);
    const lines = readFileSync(workspacePath("packages", "conformance", "vectors", "2.3.0.jsonl"), "utf8").trim().split("\n");
    expect(report.total).toBe(lines.length);
    expect(report.passed).toBe(lines.length);
    expect(report.decoded).toBeGreaterThan(0);
    expect(report.encoded).toBeGreaterThan(0);
  });
});

describe("a client against a server, both from the tarballs, over loopback", () => {
  it("answers the proxy's MCP asks through @diverge/client", () => {
    const result = run(process.execPath, ["loopback.mjs"]);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      tools: { tools: [{ name: "add", inputSchema: { type: "object" } }] },
      called: { content: [{ type: "text", text: "5" }] },
    });
  });
});

describe("the binaries, from node_modules/.bin", () => {
  const bins = new Set(["diverge", "diverge-proxy", "diverge-conformance", "diverge-spec", ...publicPackages.flatMap((p) => p.bins)]);
  for (const bin of bins) {
    it(`${bin} --help prints its usage and exits 0`, () => {
      const result = run(join(project, "node_modules", ".bin", bin), ["--help"]);
      expect(result.error).toBeUndefined();
      expect(result.stderr).toBe("");
      expect(result.status).toBe(0);
      expect(result.stdout).toContain(bin);
    });
  }
});
