// An inward MCP call whose SSE stream the container's server closes mid-call (MCP 2025-11-25's
// polling pattern: the server sends a priming event with an id and a retry interval, closes the
// stream, and the client resumes it with `Last-Event-ID`), against a real MCP SDK server with an event
// store: answered through the begin scope's MCP channels, through `/tool/*`, and through
// `diverge connect --serve-tools` (HTTP and stdio) on both transports. Every inward call is bounded: a
// stream that cannot be resumed ends the call with -32603 naming why, and the caller's cancellation
// (its path closed, its connection gone) cancels the call at the container's server.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools } from "../src/index.js";
import { startResumeContainer, type ResumeContainer } from "./resume-container.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

type Transport = "multiplexed" | "paths";
const TRANSPORTS: readonly Transport[] = ["multiplexed", "paths"];

async function fixture(): Promise<{ app: ResumeContainer; proxy: RunningProxy }> {
  const app = await startResumeContainer();
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, secretsGate: false, log: () => {} });
  cleanups.push(() => proxy.close());
  return { app, proxy };
}

function textOf(result: unknown): string {
  return ((result as { content: { text: string }[] }).content[0]!).text;
}

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A hang guard: the promise, or a rejection naming `what` after `ms`. */
function guard<T>(promise: Promise<T>, what: string, ms = 20_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`hang: ${what}`)), ms)))]).finally(() => clearTimeout(timer));
}

/** The container's MCP server as the library reaches it on `transport`. */
async function library(proxy: RunningProxy, transport: Transport) {
  const url = `ws://127.0.0.1:${proxy.port}`;
  if (transport === "paths") return new PathsTools(url);
  const connection = await openContainer(url, { timeoutMs: 10_000 });
  cleanups.push(() => connection.close());
  await connection.beginTools({ arguments: null }, { timeoutMs: 10_000 });
  return Object.assign(connection.mcp, { connection });
}

/** `diverge connect --serve-tools 127.0.0.1:0` on `transport`; resolves with its MCP URL. */
async function serveTools(proxy: RunningProxy, transport: Transport): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const url = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0];
    if (url) return { url, child };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`connect did not serve tools; exit ${child.exitCode}; stderr:\n${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function httpAgent(url: string): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  return client;
}

async function stdioAgent(proxy: RunningProxy, transport: Transport): Promise<Client> {
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: "node", args: [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools-stdio"], stderr: "ignore" }));
  cleanups.push(() => client.close());
  return client;
}

describe("an inward MCP call whose SSE stream the container's server closes mid-call", () => {
  for (const transport of TRANSPORTS) {
    it(`is answered on the resumed stream through the library — ${transport}`, { timeout: 45_000 }, async () => {
      const { app, proxy } = await fixture();
      const mcp = await library(proxy, transport);
      const result = await guard(mcp.callTool({ name: "resumed" }), "the resumed call");
      expect(textOf(result)).toBe("answered after the stream was resumed");
      expect(app.resumptions()).toBeGreaterThan(0);
    });

    it(`is answered through --serve-tools (HTTP) — ${transport}`, { timeout: 45_000 }, async () => {
      const { app, proxy } = await fixture();
      const { url } = await serveTools(proxy, transport);
      const agent = await httpAgent(url);
      const result = await guard(agent.callTool({ name: "resumed" }), "the resumed call through --serve-tools");
      expect(textOf(result)).toBe("answered after the stream was resumed");
      expect(app.resumptions()).toBeGreaterThan(0);
    });

    it(`is answered through --serve-tools-stdio — ${transport}`, { timeout: 45_000 }, async () => {
      const { proxy } = await fixture();
      const agent = await stdioAgent(proxy, transport);
      const result = await guard(agent.callTool({ name: "resumed" }), "the resumed call through --serve-tools-stdio");
      expect(textOf(result)).toBe("answered after the stream was resumed");
    });

    it(`ends with -32603 naming why when the stream cannot be resumed — ${transport}`, { timeout: 45_000 }, async () => {
      const { proxy } = await fixture();
      const mcp = await library(proxy, transport);
      const failure = await guard(
        mcp.callTool({ name: "forgotten" }).then(
          () => undefined,
          (error: unknown) => error as { detail?: { variant: string; error?: { code: number; message: string } } },
        ),
        "the call whose stream cannot be resumed",
      );
      expect(failure?.detail?.variant).toBe("Mcp");
      expect(failure?.detail?.error?.code).toBe(-32603);
      expect(failure?.detail?.error?.message).toMatch(/stream .*could not be resumed/);
      // The proxy's inward client is not stuck: the next call is answered (on a new session).
      expect(textOf(await guard(mcp.callTool({ name: "resumed" }), "the call after"))).toBe("answered after the stream was resumed");
    });
  }

  it("is cancelled at the container's server when the provider closes its /tool/call-tool path", { timeout: 45_000 }, async () => {
    const { app, proxy } = await fixture();
    const mcp = new PathsTools(`ws://127.0.0.1:${proxy.port}`);
    const controller = new AbortController();
    const call = mcp.callTool({ name: "never" }, { signal: controller.signal }).catch((error: unknown) => error);
    await until(() => app.calls.includes("never"), "the call to reach the container");
    controller.abort();
    await call;
    await until(() => app.calls.includes("never:cancelled"), "the container's server to see the call cancelled");
  });

  it("is cancelled at the container's server when the provider's connection on / ends", { timeout: 45_000 }, async () => {
    const { app, proxy } = await fixture();
    const mcp = await library(proxy, "multiplexed");
    const call = mcp.callTool({ name: "never" }, { timeoutMs: 0 }).catch((error: unknown) => error);
    await until(() => app.calls.includes("never"), "the call to reach the container");
    await (mcp as unknown as { connection: { close(): Promise<void> } }).connection.close();
    await call;
    await until(() => app.calls.includes("never:cancelled"), "the container's server to see the call cancelled");
  });

  for (const transport of TRANSPORTS) {
    it(`ends with the agent's own timeout through --serve-tools, and the call is cancelled at the container's server — ${transport}`, { timeout: 45_000 }, async () => {
      const { app, proxy } = await fixture();
      const { url, child } = await serveTools(proxy, transport);
      const agent = await httpAgent(url);
      const failure = await agent.callTool({ name: "never" }, undefined, { timeout: 1500 }).catch((error: unknown) => error as { code?: number });
      expect((failure as { code?: number }).code).toBe(-32001);
      // The bridge is not stuck: the next call is answered.
      expect(textOf(await guard(agent.callTool({ name: "resumed" }), "the call after the timeout"))).toBe("answered after the stream was resumed");
      if (transport === "multiplexed") {
        // The begin scope's channels cannot be cancelled (multiplexed.md: only the responder ends a
        // channel): the call lasts until the provider's connection ends, which cancels it.
        child.kill("SIGTERM");
      }
      await until(() => app.calls.includes("never:cancelled"), "the container's server to see the call cancelled");
    });
  }
});

describe("diverge connect --serve-tools-stdio: its stdin closing", () => {
  for (const transport of TRANSPORTS) {
    it(`ends it cleanly, exit code 0, as every stdio MCP server does — ${transport}`, { timeout: 45_000 }, async () => {
      const { proxy } = await fixture();
      const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", transport, "--serve-tools-stdio"], { stdio: ["pipe", "pipe", "pipe"] });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
      cleanups.push(async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        await exited;
      });
      let stdout = "";
      let stderr = "";
      child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      // One session made and used, as an agent does, then its stdin closes.
      child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } })}\n`);
      await until(() => stdout.includes('"id":1'), `the initialize answer (stderr: ${stderr})`);
      child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
      child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "resumed" } })}\n`);
      await until(() => stdout.includes('"id":2'), "the call's answer");
      child.stdin!.end();
      const exit = await guard(exited, `the bridge to exit once its stdin closed (stderr: ${stderr})`);
      expect(exit).toEqual({ code: 0, signal: null });
    });
  }
});

describe("the secrets gate and the paths transport, which cannot feed secrets", () => {
  async function gatedFixture(): Promise<{ app: ResumeContainer; proxy: RunningProxy }> {
    const app = await startResumeContainer();
    cleanups.push(() => app.close());
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, log: () => {} });
    cleanups.push(() => proxy.close());
    return { app, proxy };
  }

  it("diverge connect --transport paths --serve-tools says so at start, and every agent request is answered at once with an MCP error naming the gate and --no-secrets-gate", { timeout: 45_000 }, async () => {
    const { proxy } = await gatedFixture();
    const child = spawn("node", [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--transport", "paths", "--serve-tools", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    });
    await until(() => /http:\/\/127\.0\.0\.1:\d+\/mcp/.test(stderr), "the bridge to serve");
    await until(() => /secrets gate/.test(stderr) && /--no-secrets-gate/.test(stderr), `the start to name the gate (stderr: ${stderr})`);
    const agent = await httpAgent(/http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)![0]);
    // The agent's own timeout is a minute: the answer comes long before (the guard is the hang check).
    const failure = await guard(agent.callTool({ name: "resumed" }).then(() => undefined, (error: unknown) => error as { code?: number; message?: string }), "the gated call", 20_000);
    expect(failure?.code).toBe(-32603);
    expect(failure?.message).toContain("secrets gate");
    expect(failure?.message).toContain("--no-secrets-gate");
    expect(proxy.gate.held).toBe(0);
  });

  it("/tool/* is held while a provider begun on / can feed the secrets, until its path ends or the feed opens the gate", { timeout: 45_000 }, async () => {
    const { proxy } = await gatedFixture();
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, { timeoutMs: 10_000 });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: null }, { timeoutMs: 10_000 });
    const tools = new PathsTools(`ws://127.0.0.1:${proxy.port}`);
    const controller = new AbortController();
    const held = tools.listTools(undefined, { signal: controller.signal }).then(() => "answered", () => "given up");
    await until(() => proxy.gate.held === 1, "the exchange to be held");
    controller.abort();
    expect(await held).toBe("given up");
    // The held exchange leaves the gate with its path: nothing is held for nobody.
    await until(() => proxy.gate.held === 0, "the gate to let the abandoned exchange go");
    const later = tools.callTool({ name: "resumed" });
    await until(() => proxy.gate.held === 1, "the next exchange to be held");
    await connection.feedSecrets({}, { timeoutMs: 10_000 });
    expect(textOf(await guard(later, "the held call once fed"))).toBe("answered after the stream was resumed");
  });
});
