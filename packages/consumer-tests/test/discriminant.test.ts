// Issue 26 §3: every union of @diverge/codec names its variant in `variant`. A program in the
// consumer project (project/discriminant.ts) is compiled against the installed codec tarball with
// TypeScript 5.9: it switches on `.variant` over unions the spec names by `type`, `kind`,
// `endpoint`, `ask`, `ack` and `answer`, and a @ts-expect-error on each old name proves it is gone
// (an unused directive fails the compile). The compiled program then runs on Node.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";

const { project } = inject("consumer");
const run = promisify(execFile);

describe("one discriminant for every codec union", () => {
  it("compiles a program switching on .variant, with every old member name refused, and runs it", { timeout: 120_000 }, async () => {
    const tsc = join(project, "node_modules", "typescript", "bin", "tsc");
    const compiled = await run(process.execPath, [tsc, "-p", "tsconfig.discriminant.json"], { cwd: project, env: cleanEnv() }).then(
      (r) => `${r.stdout}${r.stderr}`,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ""}${e.stderr ?? ""}` || String(e),
    );
    expect(compiled).toBe("");
    const { stdout } = await run(process.execPath, [join(project, "discriminant-out", "discriminant.js")], { cwd: project, env: cleanEnv() });
    expect(JSON.parse(stdout)).toEqual([
      "frame Request scope 1 payload 1",
      "requests ask VaultGet db on channel 3",
      "scope request FilesystemTree",
      "fuse ask Read a.txt at 5",
      "fuse ack Refused no",
      "fuse read answer Data 2 bytes",
      "filetree Snapshot File a",
    ]);
  });
});
