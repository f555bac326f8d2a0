// What `pnpm pack` puts in each public tarball: only what a consumer needs, and a manifest a
// registry and every resolver can use.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { expectedPublic, publicPackages, workspacePath } from "./packages.js";

interface Manifest {
  name: string;
  version: string;
  license?: string;
  type?: string;
  sideEffects?: boolean;
  types?: string;
  main?: string;
  bin?: Record<string, string>;
  exports?: Record<string, string | Record<string, string>>;
  files?: string[];
  engines?: Record<string, string>;
  repository?: { type: string; url: string; directory: string };
  publishConfig?: { access?: string };
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
}

/** What the native binding (@diverge/fuse-native) ships: its JavaScript, types, C source to build elsewhere, and the prebuilt binary. */
const NATIVE_FILES = ["package.json", "README.md", "LICENSE", "CHANGELOG.md", "index.js", "index.d.ts", "fuse-native.c", "semaphore.h", "binding.gyp", "scripts/compile.js", "prebuilds/linux-x64/node.napi.node", "prebuilds/linux-x64/libfuse3/fuse.node"];

const { tarballs } = inject("consumer");
const rootLicense = readFileSync(workspacePath("LICENSE"), "utf8");

for (const pkg of publicPackages) {
  describe(`${pkg.name} tarball`, () => {
    const tarball = tarballs[pkg.name]!;
    const entries = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).split("\n").filter(Boolean).map((e) => e.replace(/^package\//, ""));
    const read = (file: string): string => execFileSync("tar", ["-xzOf", tarball, `package/${file}`], { encoding: "utf8" });
    const manifest = JSON.parse(read("package.json")) as Manifest;
    const workspaceManifest = JSON.parse(readFileSync(workspacePath(pkg.dir, "package.json"), "utf8")) as Manifest;

    it.runIf(pkg.kind === "native")("ships its JavaScript, types, C source and the prebuilt linux-x64 binary, and nothing else", () => {
      expect([...entries].sort()).toEqual([...NATIVE_FILES].sort());
      // The install step compiles only where no prebuilt binary loads: linux-x64 needs no compiler.
      expect(manifest.scripts?.install).toBe("node scripts/compile.js --if-no-prebuild");
      expect(Object.keys(manifest.scripts ?? {}).filter((s) => /^(pre|post)?install$|^prepare$/.test(s))).toEqual(["install"]);
    });

    it.runIf(pkg.kind === "typescript")("ships built JS, declarations, maps, README and LICENSE, and nothing else", () => {
      // @diverge/server ships the proxy's two bundles (what `diverge-proxy bundle` copies into an image);
      // @diverge/example-container its DIVERGE.md (the package folder is a container root).
      const allowed = /^(package\.json|README\.md|LICENSE|CHANGELOG\.md|DIVERGE\.md|dist\/.+\.(js|d\.ts|js\.map|d\.ts\.map)|dist\/bundle\/diverge-proxy\.(mjs|cjs)|vectors\/[^/]+\.jsonl)$/;
      expect(entries.filter((e) => !allowed.test(e))).toEqual([]);
      expect(entries).toEqual(expect.arrayContaining(["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts"]));
      // No tests, fixtures or sources: the vectors of @diverge/conformance are its product, not a fixture.
      expect(entries.filter((e) => /(^|\/)(test|tests|__tests__|fixtures?|src)\/|\.(test|spec)\.|\.tsbuildinfo$|(^|\/)[^/]+\.ts$(?<!\.d\.ts)/.test(e))).toEqual([]);
      if (pkg.name !== "@diverge/conformance") expect(entries.filter((e) => e.startsWith("vectors/"))).toEqual([]);
    });

    it("ships no map whose sources a consumer's debugger or editor cannot open", () => {
      // A .js.map carries its sources (inlineSources); a .d.ts.map would point at src/*.ts, which is
      // not shipped, so declaration maps are left out.
      expect(entries.filter((e) => e.endsWith(".d.ts.map"))).toEqual([]);
      // Every map (issue 26 §4), from one extraction of the tarball.
      const unpacked = mkdtempSync(join(tmpdir(), "diverge-maps-"));
      execFileSync("tar", ["-xzf", tarball, "-C", unpacked]);
      const maps = entries.filter((e) => e.endsWith(".map"));
      for (const map of maps) {
        const parsed = JSON.parse(readFileSync(join(unpacked, "package", map), "utf8")) as { sources: string[]; sourcesContent?: (string | null)[] };
        parsed.sources.forEach((source, i) => {
          const shipped = entries.includes(join(dirname(map), source).replace(/\\/g, "/"));
          expect(shipped || typeof parsed.sourcesContent?.[i] === "string", `${map} → ${source}`).toBe(true);
        });
      }
      // A built .js naming a map that is not shipped would send a debugger looking for it.
      for (const js of entries.filter((e) => /\.(m|c)?js$/.test(e))) {
        const named = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(unpacked, "package", js), "utf8"))?.[1];
        if (named && !named.startsWith("data:")) expect(entries, `${js} → ${named}`).toContain(join(dirname(js), named).replace(/\\/g, "/"));
      }
      rmSync(unpacked, { recursive: true, force: true });
    });

    it("names in `files` only what the tarball holds (no missing CHANGELOG, issue 26 §4)", () => {
      for (const entry of manifest.files ?? []) {
        if (entry.startsWith("!")) continue;
        expect(entries.some((e) => e === entry || e.startsWith(`${entry}/`)), entry).toBe(true);
      }
    });

    it("ships the repository's MIT LICENSE", () => {
      // The vendored binding ships fuse-native's MIT notice after the repository's (its package ships none).
      if (pkg.kind === "native") {
        expect(read("LICENSE").startsWith(rootLicense)).toBe(true);
        expect(read("LICENSE")).toContain("Copyright (c) Mathias Buus (@mafintosh) and the fuse-native contributors");
      } else expect(read("LICENSE")).toBe(rootLicense);
    });

    it("has the fields a registry and resolvers need", () => {
      expect(manifest.name).toBe(pkg.name);
      expect(manifest.version).toBe(workspaceManifest.version);
      expect(manifest.license).toBe("MIT");
      expect(manifest.type).toBe(pkg.kind === "native" ? "commonjs" : "module");
      expect(manifest.sideEffects).toBe(false);
      expect(manifest.engines).toEqual({ node: ">=20.19" });
      expect(manifest.publishConfig?.access).toBe("public");
      expect(manifest.repository).toEqual({ type: "git", url: expect.stringMatching(/^git\+https:\/\/.+\.git$/), directory: pkg.dir });
      expect(manifest.types).toBe(pkg.kind === "native" ? "./index.d.ts" : "./dist/index.d.ts");
      expect(entries).toContain(manifest.types!.replace(/^\.\//, ""));
      expect(manifest.files).toEqual(expect.arrayContaining([pkg.kind === "native" ? "prebuilds/linux-x64/node.napi.node" : "dist", "README.md", "LICENSE"]));
    });

    it("lists `types` first in every export condition, and every target is in the tarball", () => {
      for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
        if (typeof target === "string") {
          if (!target.includes("*")) expect(entries, subpath).toContain(target.replace(/^\.\//, ""));
          continue;
        }
        expect(Object.keys(target)[0], subpath).toBe("types");
        for (const file of Object.values(target)) expect(entries, `${subpath} → ${file}`).toContain(file.replace(/^\.\//, ""));
      }
      expect(manifest.exports?.["."]).toBeDefined();
    });

    it("installs its binaries from files that start with a node shebang", () => {
      for (const file of Object.values(manifest.bin ?? {})) {
        expect(entries).toContain(file.replace(/^\.\//, ""));
        expect(read(file.replace(/^\.\//, "")).startsWith("#!/usr/bin/env node\n")).toBe(true);
      }
    });

    it("turns workspace dependencies into real version ranges", () => {
      for (const field of ["dependencies", "peerDependencies", "optionalDependencies"] as const) {
        for (const [name, range] of Object.entries(manifest[field] ?? {})) {
          expect(range, `${field}.${name}`).not.toMatch(/^(workspace|link|file):/);
          const inWorkspace = publicPackages.find((p) => p.name === name);
          if (inWorkspace) {
            const version = (JSON.parse(readFileSync(workspacePath(inWorkspace.dir, "package.json"), "utf8")) as Manifest).version;
            expect(range, `${field}.${name}`).toBe(version);
          }
        }
      }
      expect(JSON.stringify(manifest)).not.toContain("workspace:");
    });
  });
}

it("packs at least the packages the issue names", () => {
  expect(Object.keys(tarballs)).toEqual(expect.arrayContaining(expectedPublic));
});
