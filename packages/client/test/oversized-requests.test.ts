// A request over the proxy's message limit is refused alone, unsent (ContainerError TooLarge), on
// every scope of the multiplexed connection: the proxy ends the whole connection (close 1009) on a
// frame over its limit, which would fail every other exchange with it. Before: a tools/call over the
// limit ended the connection and the next call failed `Lost`. Also through `--serve-tools`: the agent
// gets a JSON-RPC error naming the limit and its next call is served.
import { describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";
import { ContainerError, openContainer } from "../src/index.js";
import { cleanups, httpAgent, serveTools } from "./inward-helpers.js";

const LIMIT = 64 * 1024;

async function proxyWithLimit() {
  const app = await startExampleContainer();
  cleanups.push(() => app.close());
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, maxMessageBytes: LIMIT, log: () => {} });
  cleanups.push(() => proxy.close());
  return proxy;
}

async function rejection(promise: Promise<unknown>): Promise<ContainerError> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(outcome).toBeInstanceOf(ContainerError);
  return outcome as ContainerError;
}

describe("a request over the proxy's message limit (multiplexed)", () => {
  it("a tools/call is refused alone with TooLarge; the connection stays and the next call is answered", async () => {
    const proxy = await proxyWithLimit();
    const ended: number[] = [];
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { maxMessageBytes: LIMIT, onEvent: (event) => event.type === "ended" && ended.push(event.code) });
    cleanups.push(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const refused = await rejection(connection.mcp.callTool({ name: "greet", arguments: { name: "x".repeat(LIMIT) } }));
    expect(refused.detail).toMatchObject({ variant: "TooLarge", limit: LIMIT });
    expect(refused.message).toContain(`larger than the proxy's message limit of ${LIMIT} bytes`);
    expect(await connection.mcp.callTool({ name: "greet", arguments: { name: "Ada" } })).toEqual({ content: [{ type: "text", text: "Hi, Ada!" }] });
    expect(connection.isEnded).toBe(false);
    expect(ended).toEqual([]);
  });

  it("a begin whose arguments are over the limit is refused unsent; a begin after it is served", async () => {
    const proxy = await proxyWithLimit();
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { maxMessageBytes: LIMIT });
    cleanups.push(() => connection.close());
    const refused = await rejection(connection.beginTools({ arguments: { greeting: "x".repeat(LIMIT) } }));
    expect(refused.detail).toMatchObject({ variant: "TooLarge", what: "tools::begin" });
    expect((await connection.beginTools({ arguments: { greeting: "Hi" } })).length).toBeGreaterThan(0);
  });
});

describe("diverge connect --serve-tools --max-message-bytes (multiplexed)", () => {
  it("answers an agent's tools/call over the limit with a JSON-RPC error naming it; the next call is served", async () => {
    const proxy = await proxyWithLimit();
    const { url, child } = await serveTools(proxy, "multiplexed", ["--arguments", '{"greeting":"Hey"}', "--max-message-bytes", String(LIMIT)]);
    const agent = await httpAgent(url);
    // Under the bridge's body bound (twice the limit), over the proxy's message limit.
    const failed = await agent.callTool({ name: "greet", arguments: { name: "x".repeat(LIMIT) } }).then(
      () => undefined,
      (error: { message: string }) => error,
    );
    expect(failed?.message).toContain(`larger than the proxy's message limit of ${LIMIT} bytes`);
    expect(await agent.callTool({ name: "greet", arguments: { name: "Ada" } })).toMatchObject({ content: [{ type: "text", text: "Hey, Ada!" }] });
    expect(child.exitCode).toBe(null);
  });
});
