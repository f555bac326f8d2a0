// The proxy as a real process (the workspace build's CLI or a bundle) and the workspace provider
// beside it, for the tests that kill the proxy (fuse-proxy-killed) or run every family against a
// bundle (bundle-families). Conditions are polled with a generous overall deadline, never slept for.
import { spawn, type ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
export const cliEntry = join(packageDir, "dist", "cli.js");
/**
 * The provider: the built client package (it depends on this package for its own tests, so it is
 * loaded from its dist rather than declared; turbo builds it before this package's tests).
 */
export const clientEntry = join(packageDir, "..", "client", "dist", "index.js");
// The client's own types, for the test's reading only (its dist is loaded at run time).
export type DivergeClient = typeof import("../../client/src/index.js");
export const loadClient = async (): Promise<DivergeClient> => (await import(pathToFileURL(clientEntry).href)) as DivergeClient;

export interface ProxyProcess {
  readonly child: ChildProcess;
  /** The provider-facing port and the program-facing port. */
  readonly ports: { provider: number; program: number };
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** Everything it printed so far, both streams. */
  output(): string;
}

/**
 * Starts `command args… --host 127.0.0.1 --port 0 --program-port 0 --pg-port 0 extra…` from `cwd` with
 * nothing of the workspace's environment (no NODE_PATH, NODE_OPTIONS) but the choice of libfuse
 * (DIVERGE_FUSE_LIBFUSE, when set), and resolves once it prints its listening line.
 */
export async function startProxyProcess(command: string, args: readonly string[], cwd: string, extra: readonly string[] = []): Promise<ProxyProcess> {
  const child = spawn(command, [...args, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", ...extra], {
    cwd,
    env: { PATH: process.env.PATH ?? "", ...(process.env.DIVERGE_FUSE_LIBFUSE ? { DIVERGE_FUSE_LIBFUSE: process.env.DIVERGE_FUSE_LIBFUSE } : {}) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes("\n")) resolve(stdout.split("\n")[0]!);
    });
    void exit.then(({ code, signal }) => reject(new Error(`the proxy exited (${code ?? signal}) before listening: ${stderr}`)));
  });
  const provider = Number(/ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)?.[1]);
  const program = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(line)?.[1]);
  return { child, ports: { provider, program }, exit, stderr: () => stderr, output: () => stdout + stderr };
}

/** Polls `condition` (every 50 ms) until it gives a value other than undefined/false, or the deadline passes. */
export async function waitFor<T>(condition: () => T | undefined | false | Promise<T | undefined | false>, what: string, deadlineMs = 60_000): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`waited ${deadlineMs} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The mount points in /proc/self/mountinfo (unescaped). */
export async function mountPoints(): Promise<string[]> {
  const info = await readFile("/proc/self/mountinfo", "utf8");
  return info
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => line.split(" ")[4]!.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))));
}
export const isMounted = async (path: string) => (await mountPoints()).includes(path);
