// The public packages under test: every package of the workspace that is not private, found the
// way pnpm finds them (packages/* and tools/*), so a new public package is packed and checked too.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const here = dirname(fileURLToPath(import.meta.url));
export const packageRoot = resolve(here, "..");
export const workspaceRoot = resolve(packageRoot, "..", "..");
export const workspacePath = (...parts: string[]): string => join(workspaceRoot, ...parts);

export interface PublicPackage {
  readonly name: string;
  readonly version: string;
  /** The package folder, relative to the workspace root. */
  readonly dir: string;
  /** The binaries it installs into node_modules/.bin. */
  readonly bins: readonly string[];
  /**
   * `native`: a compiled Node-API binding (a binding.gyp beside its package.json: @diverge/fuse-native),
   * a CommonJS package of hand-written JavaScript, its types and a prebuilt binary, not built from
   * TypeScript into dist/; `typescript` otherwise.
   */
  readonly kind: "typescript" | "native";
}

/** The packages the issue names; the search below must find at least these. */
export const expectedPublic = ["@diverge/client", "@diverge/codec", "@diverge/conformance", "@diverge/example-container", "@diverge/fuse-native", "@diverge/multiplexer", "@diverge/server", "@diverge/spec-compiler"];

export const publicPackages: readonly PublicPackage[] = ["packages", "tools"].flatMap((folder) =>
  readdirSync(workspacePath(folder))
    .sort()
    .flatMap((name) => {
      const file = workspacePath(folder, name, "package.json");
      if (!existsSync(file)) return [];
      const manifest = JSON.parse(readFileSync(file, "utf8")) as { name: string; version: string; private?: boolean; bin?: Record<string, string> };
      if (manifest.private) return [];
      const kind = existsSync(workspacePath(folder, name, "binding.gyp")) ? "native" : "typescript";
      return [{ name: manifest.name, version: manifest.version, dir: `${folder}/${name}`, bins: Object.keys(manifest.bin ?? {}), kind }];
    }),
);

/** `@diverge/codec` 2.3.0 packs as `diverge-codec-2.3.0.tgz`. */
export function tarballName(name: string, version: string): string {
  return `${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`;
}
