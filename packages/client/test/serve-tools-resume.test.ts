// `diverge connect --serve-tools` / `--serve-tools-stdio` and a container's server that closes a
// call's SSE stream mid-call (MCP 2025-11-25's polling): the call is answered on the resumed stream,
// on both transports. And `--serve-tools-stdio` ends, exit code 0, when its stdin closes.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools } from "../src/index.js";
import { startResumeContainer, type ResumeContainer } from "./resume-container.js";
import { cleanups, cli, fixture, guard, httpAgent, library, serveTools, stdioAgent, textOf, TRANSPORTS, until } from "./inward-helpers.js";

describe("an inward MCP call whose SSE stream the container's server closes mid-call, through the bridge", () => {
  for (const transport of TRANSPORTS) {
    it(`is answered through --serve-tools (HTTP) — ${transport}`, { timeout: 120_000 }, async () => {
      const { app, proxy } = await fixture();
      const { url } = await serveTools(proxy, transport);
      const agent = await httpAgent(url);
      const result = await guard(agent.callTool({ name: "resumed" }), "the resumed call through --serve-tools");
      expect(textOf(result)).toBe("answered after the stream was resumed");
      expect(app.resumptions()).toBeGreaterThan(0);
    });

    it(`is answered through --serve-tools-stdio — ${transport}`, { timeout: 120_000 }, async () => {
      const { proxy } = await fixture();
      const agent = await stdioAgent(proxy, transport);
      const result = await guard(agent.callTool({ name: "resumed" }), "the resumed call through --serve-tools-stdio");
      expect(textOf(result)).toBe("answered after the stream was resumed");
    });
  }
});

describe("diverge connect --serve-tools-stdio: its stdin closing", () => {
  for (const transport of TRANSPORTS) {
    it(`ends it cleanly, exit code 0, as every stdio MCP server does — ${transport}`, { timeout: 120_000 }, async () => {
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

