// Issue 26 §3: every union of @diverge/codec names its variant in `variant`. A program in the
// consumer project (project/discriminant.ts) is compiled against the installed codec tarball with
// TypeScript 5.9: it switches on `.variant` over unions the spec names by `type`, `kind`,
// `endpoint`, `ask`, `ack` and `answer`, and a @ts-expect-error on each old name proves it is gone
// (an unused directive fails the compile). The compiled program then runs on Node. TypeScript 5.9
// compiles and runs it; TypeScript 7 (what `npm i -D typescript` installs now) checks it too.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, inject, it } from "vitest";
import { cleanEnv } from "./global-setup.js";

const { project, tsc } = inject("consumer");
const run = promisify(execFile);

const compile = (version: keyof typeof tsc, ...args: string[]): Promise<string> =>
  run(process.execPath, [tsc[version], "-p", "tsconfig.discriminant.json", ...args], { cwd: project, env: cleanEnv() }).then(
    (r) => `${r.stdout}${r.stderr}`,
    (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ""}${e.stderr ?? ""}` || String(e),
  );

describe("one discriminant for every codec union", () => {
  it("TypeScript 5.9 compiles a program switching on .variant, with every old member name refused, and it runs", { timeout: 120_000 }, async () => {
    expect(await compile("5.9")).toBe("");
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

  it("TypeScript 7 checks the same program the same way", { timeout: 120_000 }, async () => {
    expect(await compile("7", "--noEmit")).toBe("");
  });
});
