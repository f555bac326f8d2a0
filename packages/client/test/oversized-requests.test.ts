// A request over the proxy's message limit is refused alone, unsent (ContainerError TooLarge), on
// every scope of the multiplexed connection: the proxy ends the whole connection (close 1009) on a
// frame over its limit, which would fail every other exchange with it. Before: a tools/call over the
// limit ended the connection and the next call failed `Lost`. Also through `--serve-tools`: the agent
// gets a JSON-RPC error naming the limit and its next call is served.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";
import { ContainerError, openContainer } from "../src/index.js";

const LIMIT = 64 * 1024;
const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

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
    const child = spawn(process.execPath, [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--arguments", '{"greeting":"Hey"}', "--max-message-bytes", String(LIMIT), "--serve-tools", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    });
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", () => {
        const found = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(stderr)?.[0];
        if (found) resolve(found);
      });
      child.once("exit", (code) => reject(new Error(`connect exited (${code}): ${stderr}`)));
    });
    const agent = new Client({ name: "agent", version: "1.0.0" });
    await agent.connect(new StreamableHTTPClientTransport(new URL(url)));
    cleanups.push(() => agent.close());
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
