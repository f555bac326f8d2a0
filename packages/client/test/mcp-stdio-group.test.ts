// A stdio MCP server started by the provider (relayToMcp's command target, `--mcp-stdio`) runs in a
// process group of its own: closing the relay, or stopping `diverge connect` with SIGTERM, ends what
// the server left behind too — a wrapper script's background child, which holds the server's stdout
// open, does not outlive the provider. (The MCP SDK's own stdio transport signals only its child.)
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy } from "@diverge/server";
import { connectProxy, relayToMcp } from "../src/index.js";
import { programClient } from "./paths-helpers.js";

const stdioServer = fileURLToPath(new URL("./paths-stdio-server.mjs", import.meta.url));
const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/** A wrapper that leaves a background child (its pid in `pidFile`) and then becomes the MCP server. */
function wrapperScript(): { script: string; pidFile: string } {
  const dir = mkdtempSync(join(tmpdir(), "diverge-stdio-group-"));
  const pidFile = join(dir, "child.pid");
  const script = join(dir, "server.sh");
  writeFileSync(script, `#!/bin/sh\nsleep 300 &\necho $! > ${pidFile}\nexec node ${stdioServer}\n`);
  chmodSync(script, 0o755);
  return { script, pidFile };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Until `pid` has gone; false if it is still there after `ms` (a hang guard, not a timing claim). */
async function gone(pid: number, ms = 60_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

async function proxyWithProgram() {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  cleanups.push(() => proxy.close());
  return proxy;
}

describe("a stdio MCP server's process group", () => {
  it("relay.close() ends the server and the child it left behind", { timeout: 120_000 }, async () => {
    const { script, pidFile } = wrapperScript();
    const proxy = await proxyWithProgram();
    const relay = relayToMcp({ command: script });
    cleanups.push(() => relay.close());
    const connection = connectProxy(`ws://127.0.0.1:${proxy.port}`, relay, { minBackoffMs: 10 });
    cleanups.push(() => connection.close());
    await connection.whenConnected();
    const program = await programClient(proxy.programPort);
    cleanups.push(() => program.close());
    const result = await program.callTool({ name: "reverse", arguments: { text: "abc" } });
    expect(result.content).toEqual([{ type: "text", text: "cba" }]);
    const child = Number(readFileSync(pidFile, "utf8"));
    expect(alive(child)).toBe(true);
    await relay.close();
    expect(await gone(child)).toBe(true);
  });

  it("diverge connect --mcp-stdio stops on SIGTERM and takes the server's children with it", { timeout: 120_000 }, async () => {
    const { script, pidFile } = wrapperScript();
    const proxy = await proxyWithProgram();
    const provider = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--mcp-stdio", script], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    provider.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => provider.once("exit", (code) => resolve(code)));
    cleanups.push(async () => {
      if (provider.exitCode === null) provider.kill("SIGKILL");
      await exited;
    });
    const deadline = Date.now() + 90_000;
    while (!stderr.includes("connected to")) {
      if (provider.exitCode !== null || Date.now() > deadline) throw new Error(`never connected; stderr:\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const program = await programClient(proxy.programPort);
    cleanups.push(() => program.close());
    const result = await program.callTool({ name: "reverse", arguments: { text: "abc" } });
    expect(result.content).toEqual([{ type: "text", text: "cba" }]);
    expect(existsSync(pidFile)).toBe(true);
    const child = Number(readFileSync(pidFile, "utf8"));
    provider.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(await gone(child)).toBe(true);
  });
});
