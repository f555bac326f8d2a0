// Test helpers: a throwaway copy of the parts of the repository the compiler reads and writes.
import { cpSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { GENERATED_DIRS } from "../src/generate.js";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const cli = join(repoRoot, "tools", "spec-compiler", "dist", "cli.js");

/** A temp folder holding spec/ and every generated folder, as committed. */
export function copyOfRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), "diverge-spec-"));
  cpSync(join(repoRoot, "spec"), join(dir, "spec"), { recursive: true });
  // The guide's pages are sources of docs/ too.
  if (existsSync(join(repoRoot, "docs-src"))) cpSync(join(repoRoot, "docs-src"), join(dir, "docs-src"), { recursive: true });
  for (const generated of GENERATED_DIRS) {
    try {
      cpSync(join(repoRoot, generated), join(dir, generated), { recursive: true });
    } catch {
      // A generated folder may not exist yet in a young repository.
    }
  }
  for (const file of ["packages/codec/src/index.ts", "packages/codec/src/exchanges.ts", "packages/codec/package.json"]) {
    try {
      cpSync(join(repoRoot, file), join(dir, file));
    } catch {
      // Not every layout has every file.
    }
  }
  return dir;
}
