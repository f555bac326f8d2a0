// @arethetypeswrong/cli on every packed tarball. The packages are ESM only (Node >= 20.19), so the
// check uses attw's "esm-only" profile, which leaves out two resolutions: node10 (the pre-`exports`
// algorithm, which cannot see subpaths such as `@diverge/codec/mcp`) and node16 from CommonJS
// (where a `require` of ESM is reported as CJSResolvesToESM; Node 20.19 itself can require ESM).
// The test also pins that those two are the only complaints, so nothing else hides behind the profile.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";
import { packageRoot, publicPackages } from "./packages.js";

interface Problem {
  kind: string;
  entrypoint: string;
  resolutionKind?: string;
}

const { tarballs } = inject("consumer");
const attw = join(packageRoot, "node_modules", "@arethetypeswrong", "cli", "dist", "index.js");

describe("@arethetypeswrong/cli, profile esm-only", () => {
  for (const pkg of publicPackages) {
    it(`finds nothing wrong with ${pkg.name}`, () => {
      const result = spawnSync(process.execPath, [attw, tarballs[pkg.name]!, "--profile", "esm-only", "--no-definitely-typed", ...(pkg.kind === "native" ? ["--ignore-rules", "named-exports"] : []), "--format", "json"], {
        encoding: "utf8",
        env: { ...cleanEnv(), NO_COLOR: "1" },
        maxBuffer: 64 * 1024 * 1024,
      });
      expect(result.stderr).toBe("");
      const report = JSON.parse(result.stdout) as { problems: Record<string, Problem[]>; analysis: { types: unknown } };
      const problems = Object.values(report.problems).flat();
      // The native binding is CommonJS, `module.exports = Fuse` as fuse-native has always been: its
      // statics (Fuse.ENOENT, …) are properties of the default export, which Node's CommonJS lexer
      // cannot offer as named ESM imports ("NamedExports"); an ES module imports the default.
      const outsideProfile = problems.filter(
        (p) =>
          !(p.kind === "CJSResolvesToESM" && p.resolutionKind === "node16-cjs") &&
          !(p.kind === "NoResolution" && p.resolutionKind === "node10") &&
          !(pkg.kind === "native" && p.kind === "NamedExports"),
      );
      expect(outsideProfile).toEqual([]);
      expect(report.analysis.types).toBeTruthy();
      expect(result.status).toBe(0);
    });
  }
});
