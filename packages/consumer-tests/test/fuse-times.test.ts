// A FUSE mount from the packed tarballs as a registry install gets them (issue 24, "Still open" 1):
// the installed `diverge-proxy` with the binding npm put beside it (@diverge/fuse-native, its
// prebuilt binary: no compiler ran), a provider (the installed @diverge/client) mounting a
// directory of its own over the multiplexed transport, and a program's `touch -m` / `touch -a` of
// one time alone inside the mount landing on the provider's file, exact to the nanosecond. With the
// published fuse-native 2.2.6 the one-time change never reaches the provider (libfuse 2.9's
// high-level API answers it "done" itself) and times are cut to milliseconds.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, inject, it } from "vitest";

const { project } = inject("consumer");
const run = promisify(execFile);

/** Why this machine cannot mount, or undefined. */
const noMount = !existsSync("/dev/fuse") ? "this machine has no /dev/fuse" : process.getuid?.() !== 0 ? "a FUSE mount needs root here" : undefined;

interface Connection {
  mount(path: readonly string[], target: string, options?: { kind?: "file" | "directory" }): Promise<unknown>;
  close(): void;
}
const client = () => import(pathToFileURL(join(project, "node_modules", "@diverge", "client", "dist", "index.js")).href) as Promise<{ openContainer(url: string): Promise<Connection> }>;

const work = mkdtempSync(join(tmpdir(), "diverge-fuse-times-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

/** The installed `diverge-proxy` on free ports with `root` as --root; resolves its WebSocket port. */
async function startProxy(root: string): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const child = spawn(join(project, "node_modules", ".bin", "diverge-proxy"), ["--quiet", "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", "1", "--no-secrets-gate", "--root", root], {
    cwd: tmpdir(),
    env: { PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  // A hang guard, not a speed check: the proxy prints its listening line once it serves.
  for (let i = 0; i < 1200; i++) {
    const found = /ws:\/\/127\.0\.0\.1:(\d+)/.exec(output);
    if (found) return { child, port: Number(found[1]), output: () => output };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`diverge-proxy never printed its address:\n${output}`);
}

/** A program's command in the container, run without blocking this process (it is the provider answering the mount). */
const sh = (script: string, cwd: string) => run("sh", ["-c", script], { cwd, timeout: 60_000, env: { PATH: process.env.PATH ?? "", TZ: "UTC" } });
const times = (file: string) => {
  const st = statSync(file, { bigint: true });
  return { atimeNs: st.atimeNs, mtimeNs: st.mtimeNs };
};

describe("a FUSE mount from the installed tarballs", () => {
  it.skipIf(noMount)(`touch -m and touch -a (one time alone) land on the provider's file, exact to the nanosecond${noMount ? ` (skipped: ${noMount})` : ""}`, { timeout: 120_000 }, async () => {
    // What serves the mount is the published package's own binding, prebuilt: nothing was compiled.
    const binding = join(project, "node_modules", "@diverge", "fuse-native");
    expect(existsSync(join(binding, "prebuilds", "linux-x64", "node.napi.node"))).toBe(true);
    expect(existsSync(join(binding, "build"))).toBe(false);

    const root = mkdtempSync(join(work, "root-"));
    const provided = mkdtempSync(join(work, "provided-"));
    const file = join(provided, "f");
    writeFileSync(file, "the provider's file\n");
    const before = times(file);

    const proxy = await startProxy(root);
    const connection = await (await client()).openContainer(`ws://127.0.0.1:${proxy.port}/`);
    try {
      await connection.mount(["mnt"], provided, { kind: "directory" });
      const mnt = join(root, "mnt");

      // The modification time alone: the access time stays as it was.
      await sh("touch -m -d @1700000000.123456789 f", mnt);
      expect(times(file)).toEqual({ atimeNs: before.atimeNs, mtimeNs: 1_700_000_000_123_456_789n });

      // The access time alone: the modification time just set stays.
      await sh("touch -a -d @1600000000.987654321 f", mnt);
      expect(times(file)).toEqual({ atimeNs: 1_600_000_000_987_654_321n, mtimeNs: 1_700_000_000_123_456_789n });

      // And the program sees them back through the mount, to the nanosecond.
      const { stdout } = await sh("stat -c '%x|%y' f", mnt);
      expect(stdout.trim()).toBe("2020-09-13 12:26:40.987654321 +0000|2023-11-14 22:13:20.123456789 +0000");
    } finally {
      connection.close();
      proxy.child.kill("SIGTERM");
      await new Promise((r) => (proxy.child.exitCode !== null ? r(undefined) : proxy.child.once("exit", r)));
    }
  });
});
