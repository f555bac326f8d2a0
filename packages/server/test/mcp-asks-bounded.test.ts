// The proxy's library calls that wait on a provider (`proxy.mcp.listTools()`, `callTool()`, …) take
// `{ signal, timeoutMs }` like the client's: either ends the wait with a typed McpExchangeError
// (`TimedOut` saying whether the secrets gate held it all along, `Aborted` with the signal's reason),
// and the ask is withdrawn: its place at the secrets gate freed. Real sockets: a `/requests` line held
// by the test, which never answers.
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_MCP_TIMEOUT_MS, type McpExchangeError, type RunningProxy } from "../src/index.js";
import { rejection, RequestsLine, testProxy } from "./paths-helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function proxyWithLine(secretsGate: boolean): Promise<{ proxy: RunningProxy; requests: RequestsLine }> {
  const proxy = await testProxy({ secretsGate });
  cleanups.push(() => proxy.close());
  const requests = await RequestsLine.open(proxy.port);
  cleanups.push(async () => requests.socket.terminate());
  return { proxy, requests };
}

describe("proxy.mcp's calls that wait on the provider", () => {
  it("end with TimedOut after timeoutMs when the provider does not answer, the ask having been made", { timeout: 120_000 }, async () => {
    const { proxy, requests } = await proxyWithLine(false);
    const error = (await rejection(proxy.mcp.callTool({ name: "slow" }, { timeoutMs: 300 }))) as McpExchangeError;
    expect(error.detail).toEqual({ variant: "TimedOut", what: "tools/call", timeoutMs: 300, heldBySecretsGate: false });
    expect(error.message).toContain("did not answer within 300 ms");
    expect((await requests.nextExchange()).variant).toBe("McpCallTool");
    expect(proxy.stats().pendingAsks).toBe(0);
  });

  it("end with TimedOut naming the secrets gate when the gate held them all along, and leave the gate", { timeout: 120_000 }, async () => {
    const { proxy, requests } = await proxyWithLine(true);
    const error = (await rejection(proxy.mcp.listTools(null, { timeoutMs: 300 }))) as McpExchangeError;
    expect(error.detail).toEqual({ variant: "TimedOut", what: "tools/list", timeoutMs: 300, heldBySecretsGate: true });
    expect(error.message).toContain("secrets gate");
    expect(error.message).toContain("--no-secrets-gate");
    expect(proxy.gate.held).toBe(0);
    // Given up before the gate opened: never asked, even once it opens.
    proxy.gate.open();
    const next = proxy.mcp.listResources(null, { timeoutMs: 5000 }).catch(() => undefined);
    expect((await requests.nextExchange()).variant).toBe("McpListResources");
    void next;
  });

  it("end with Aborted, the signal's reason kept, when the caller's signal fires; at once when it already has", { timeout: 120_000 }, async () => {
    const { proxy } = await proxyWithLine(true);
    const controller = new AbortController();
    const pending = rejection(proxy.mcp.readResource({ uri: "note://one" }, { signal: controller.signal, timeoutMs: 0 }));
    expect(proxy.gate.held).toBe(1);
    const reason = new Error("the caller went away");
    controller.abort(reason);
    const error = (await pending) as McpExchangeError;
    expect(error.detail).toEqual({ variant: "Aborted", what: "resources/read", reason });
    expect(error.message).toContain("the caller went away");
    expect(proxy.gate.held).toBe(0);
    expect(proxy.stats().pendingAsks).toBe(0);
    const already = (await rejection(proxy.mcp.listTools(null, { signal: AbortSignal.abort("gone") }))) as McpExchangeError;
    expect(already.detail).toEqual({ variant: "Aborted", what: "tools/list", reason: "gone" });
  });

  it("are bounded by default, as the client's are (the MCP SDK's 60 s)", () => {
    expect(DEFAULT_MCP_TIMEOUT_MS).toBe(60_000);
  });
});
