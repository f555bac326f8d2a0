// What `diverge connect --serve-tools` says of the proxy and the container's server: a gated proxy on
// the paths transport (which cannot feed secrets) said at start and in every agent answer, at once;
// `/tool/*` held while a provider begun on / can feed; the `logging` capability with the container's
// log messages forwarded; `resources` only when the container's server has them; a --no-secrets-gate
// proxy not reported as gated.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools } from "../src/index.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startResumeContainer, type ResumeContainer } from "./resume-container.js";
import { cleanups, cli, fixture, guard, httpAgent, library, serveTools, stdioAgent, textOf, TRANSPORTS, until } from "./inward-helpers.js";

describe("the secrets gate and the paths transport, which cannot feed secrets", () => {
  async function gatedFixture(): Promise<{ app: ResumeContainer; proxy: RunningProxy }> {
    const app = await startResumeContainer();
    cleanups.push(() => app.close());
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, log: () => {} });
    cleanups.push(() => proxy.close());
    return { app, proxy };
  }

  it("diverge connect --transport paths --serve-tools says so at start, and every agent request is answered at once with an MCP error naming the gate and --no-secrets-gate", { timeout: 120_000 }, async () => {
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

  it("/tool/* is held while a provider begun on / can feed the secrets, until its path ends or the feed opens the gate", { timeout: 120_000 }, async () => {
    const { proxy } = await gatedFixture();
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, { timeoutMs: 60_000 });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: null }, { timeoutMs: 60_000 });
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
    await connection.feedSecrets({}, { timeoutMs: 60_000 });
    expect(textOf(await guard(later, "the held call once fed"))).toBe("answered after the stream was resumed");
  });
});


describe("diverge connect --serve-tools: what the bridge declares", () => {
  async function fixtureWith(resources: boolean): Promise<{ app: ResumeContainer; proxy: RunningProxy }> {
    const app = await startResumeContainer({ resources });
    cleanups.push(() => app.close());
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, secretsGate: false, log: () => {} });
    cleanups.push(() => proxy.close());
    return { app, proxy };
  }

  for (const transport of TRANSPORTS) {
    it(`the logging capability, with the container's notifications/message forwarded to the agent — ${transport}`, { timeout: 120_000 }, async () => {
      const { proxy } = await fixtureWith(true);
      const { url } = await serveTools(proxy, transport);
      const agent = await httpAgent(url);
      expect(agent.getServerCapabilities()?.logging).toEqual({});
      expect(agent.getServerCapabilities()?.resources).toBeDefined();
      const seen: unknown[] = [];
      agent.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void seen.push(notification.params.data));
      await agent.setLoggingLevel("debug");
      // A session's stream opens a moment after its initialize: asked again until one arrives (no replay).
      const deadline = Date.now() + 90_000;
      while (!seen.includes("hello from the container")) {
        if (Date.now() > deadline) throw new Error("no notifications/message reached the agent");
        await agent.callTool({ name: "log" });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    });

    it(`no resources capability when the container's server has none (resources/list is method-not-found) — ${transport}`, { timeout: 120_000 }, async () => {
      const { proxy } = await fixtureWith(false);
      const { url } = await serveTools(proxy, transport);
      const agent = await httpAgent(url);
      expect(agent.getServerCapabilities()?.resources).toBeUndefined();
      expect(agent.getServerCapabilities()?.tools).toBeDefined();
      const failure = await agent.listResources().then(() => undefined, (error: unknown) => error as { code?: number });
      expect(failure?.code).toBe(-32601);
      expect(textOf(await agent.callTool({ name: "resumed" }))).toBe("answered after the stream was resumed");
    });
  }

  it("a --no-secrets-gate proxy is not reported as gated (multiplexed, no secrets fed)", { timeout: 120_000 }, async () => {
    const { proxy } = await fixtureWith(true);
    const { url, stderr } = await serveTools(proxy, "multiplexed");
    const agent = await httpAgent(url);
    expect((await agent.listTools()).tools.map((tool) => tool.name)).toContain("resumed");
    expect(textOf(await agent.callTool({ name: "resumed" }))).toBe("answered after the stream was resumed");
    // Give a late report its chance: it would come at the first exchange, long answered by now.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(stderr(), stderr()).not.toMatch(/secrets gate/);
  });
});
