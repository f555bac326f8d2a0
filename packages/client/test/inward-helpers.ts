// Shared by the inward-MCP tests (inward-resume, serve-tools-resume, serve-tools-declares): a proxy
// before resume-container.ts's real MCP SDK server, the library on both transports, the bridge.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools } from "../src/index.js";
import { startResumeContainer, type ResumeContainer } from "./resume-container.js";

export const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
export const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

export type Transport = "multiplexed" | "paths";
export const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

export async function fixture(): Promise<{ app: ResumeContainer; proxy: RunningProxy }> {
  const app = await startResumeContainer();
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

export function textOf(result: unknown): string {
  return ((result as { content: { text: string }[] }).content[0]!).text;
}

export async function until(condition: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A hang guard: the promise, or a rejection naming `what` after `ms`. */
export function guard<T>(promise: Promise<T>, what: string, ms = 60_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`hang: ${what}`)), ms)))]).finally(() => clearTimeout(timer));
}

/** The container's MCP server as the library reaches it on `transport`. */
export async function library(proxy: RunningProxy, transport: Transport) {
  const url = `ws://127.0.0.1:${proxy.port}`;
  if (transport === "paths") return new PathsTools(url);
  const connection = await openContainer(url, { timeoutMs: 60_000 });
  cleanups.push(() => connection.close());
  await connection.beginTools({ arguments: null }, { timeoutMs: 60_000 });
  return Object.assign(connection.mcp, { connection });
}

/** `diverge connect --serve-tools 127.0.0.1:0` on `transport` (with `extra` flags); resolves with its MCP URL. */
export async function serveTools(proxy: RunningProxy, transport: Transport, extra: readonly string[] = []): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools", "127.0.0.1:0", ...extra], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    const url = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0];
    if (url) return { url, child, stderr: () => stderr };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`connect did not serve tools; exit ${child.exitCode}; stderr:\n${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export async function httpAgent(url: string): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return client;
}

export async function stdioAgent(proxy: RunningProxy, transport: Transport): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: "node", args: [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools-stdio"], stderr: "ignore" }));
  cleanups.push(() => client.close());
  return client;
}

