// The harness of the FUSE tests that mount a provider through a real proxy (fuse-posix.test.ts,
// fuse-programs.test.ts): a fresh base directory per test (the container's root and the provider's
// directory in it), the proxy in this process, a mount on either transport (paths counting its
// whole-file asks), and shell commands run as child processes — this process serves the mount.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach } from "vitest";
import { fuseUnavailable, startProxy, type RunningProxy } from "@diverge/server";
import { PathsMounts, connectProxy, openContainer, type FuseHandlers, type MultiplexedConnection, type PathsConnection } from "../src/index.js";

export const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE POSIX tests skipped: ${unavailable}`);
export const PROBE = fileURLToPath(new URL("./fuse-probe.py", import.meta.url));

export let base: string;
export let root: string;
export let provider: string;
export let proxy: RunningProxy | undefined;
export let container: MultiplexedConnection | undefined;
export let answering: PathsConnection | undefined;
export let logged: string[] = [];

export async function start(maxMessageBytes?: number): Promise<void> {
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: (line) => logged.push(line), ...(maxMessageBytes ? { maxMessageBytes } : {}) });
}

/** Registers the per-test set-up and tear-down: a fresh base directory, the proxy closed after. */
export function useFuseHarness(): void {
  beforeEach(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-")));
    root = join(base, "container");
    provider = join(base, "provider");
    await mkdir(root);
    await mkdir(provider);
    logged = [];
  });
  afterEach(async () => {
    await container?.close();
    await answering?.close();
    await proxy?.close();
    container = answering = proxy = undefined;
    await rm(base, { recursive: true, force: true });
  });
}

export type Transport = "multiplexed" | "paths";

/** Counts of the whole-file asks the provider answered (paths). */
export const counted = { fuseRead: 0, fuseWrite: 0 };

export async function mountProvider(transport: Transport, target: FuseHandlers | string = provider, maxMessageBytes?: number): Promise<string> {
  if (!proxy) await start(maxMessageBytes);
  const url = `ws://127.0.0.1:${proxy!.port}`;
  if (transport === "multiplexed") {
    container = await openContainer(url);
    await container.mount(["m"], target);
  } else {
    const mounts = new PathsMounts(url, maxMessageBytes ? { maxMessageBytes } : {});
    const handlers = mounts.handlers();
    counted.fuseRead = counted.fuseWrite = 0;
    answering = connectProxy(url, {
      ...handlers,
      fuseRead: (ask) => (counted.fuseRead++, handlers.fuseRead(ask)),
      fuseWrite: (ask) => (counted.fuseWrite++, handlers.fuseWrite(ask)),
    });
    await answering.whenConnected({ timeoutMs: 60_000 });
    await mounts.mount(["m"], target);
  }
  return join(root, "m");
}

/**
 * A shell command, in `cwd` by its own `cd`: never as the child's working directory, which it enters
 * while this process waits for it to start (a mount this process serves would wait on itself).
 */
export function sh(command: string, cwd?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile("sh", ["-c", cwd ? `cd '${cwd}' && ${command}` : command], { timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, LC_ALL: "C" } }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}
export async function ok(command: string, cwd?: string): Promise<string> {
  const r = await sh(command, cwd);
  if (r.code !== 0) throw new Error(`${command}: exit ${r.code}\n${r.stderr}`);
  return r.stdout;
}
