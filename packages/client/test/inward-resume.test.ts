// An inward MCP call whose SSE stream the container's server closes mid-call (MCP 2025-11-25's
// polling pattern: the server sends a priming event with an id and a retry interval, closes the
// stream, and the client resumes it with `Last-Event-ID`), against a real MCP SDK server with an event
// store: answered through the begin scope's MCP channels and `/tool/*`. Every inward call is bounded:
// a stream that cannot be resumed ends the call with -32603 naming why, and the caller's cancellation
// (its path closed, its connection gone, an agent's own timeout through --serve-tools) cancels the
// call at the container's server. (--serve-tools: serve-tools-resume.test.ts.)
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, PathsTools } from "../src/index.js";
import { startResumeContainer, type ResumeContainer } from "./resume-container.js";
import { cleanups, cli, fixture, guard, httpAgent, library, serveTools, stdioAgent, textOf, TRANSPORTS, until } from "./inward-helpers.js";

describe("an inward MCP call whose SSE stream the container's server closes mid-call", () => {
  for (const transport of TRANSPORTS) {
    it(`is answered on the resumed stream through the library — ${transport}`, { timeout: 120_000 }, async () => {
      const { app, proxy } = await fixture();
      const mcp = await library(proxy, transport);
      const result = await guard(mcp.callTool({ name: "resumed" }), "the resumed call");
      expect(textOf(result)).toBe("answered after the stream was resumed");
      expect(app.resumptions()).toBeGreaterThan(0);
    });

    it(`ends with -32603 naming why when the stream cannot be resumed — ${transport}`, { timeout: 120_000 }, async () => {
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

  it("is cancelled at the container's server when the provider closes its /tool/call-tool path", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture();
    const mcp = new PathsTools(`ws://127.0.0.1:${proxy.port}`);
    const controller = new AbortController();
    const call = mcp.callTool({ name: "never" }, { signal: controller.signal }).catch((error: unknown) => error);
    await until(() => app.calls.includes("never"), "the call to reach the container");
    controller.abort();
    await call;
    await until(() => app.calls.includes("never:cancelled"), "the container's server to see the call cancelled");
  });

  it("is cancelled at the container's server when the provider's connection on / ends", { timeout: 120_000 }, async () => {
    const { app, proxy } = await fixture();
    const mcp = await library(proxy, "multiplexed");
    const call = mcp.callTool({ name: "never" }, { timeoutMs: 0 }).catch((error: unknown) => error);
    await until(() => app.calls.includes("never"), "the call to reach the container");
    await (mcp as unknown as { connection: { close(): Promise<void> } }).connection.close();
    await call;
    await until(() => app.calls.includes("never:cancelled"), "the container's server to see the call cancelled");
  });

  for (const transport of TRANSPORTS) {
    it(`ends with the agent's own timeout through --serve-tools, and the call is cancelled at the container's server — ${transport}`, { timeout: 120_000 }, async () => {
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

