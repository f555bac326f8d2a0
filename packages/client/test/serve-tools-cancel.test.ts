// An agent that cancels a request through --serve-tools: the relayed exchange is given up too (the
// source sees the agent's signal abort), instead of being waited for until the container answers.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, expect, it } from "vitest";
import { serveToolsHttp, type ServingTools, type SourceCallOptions, type ToolsSource } from "../src/serve-tools.js";

let serving: ServingTools | undefined;
afterEach(async () => {
  await serving?.close();
  serving = undefined;
});

it("an agent's cancelled tools/call aborts the signal the source was given", async () => {
  let seen: AbortSignal | undefined;
  let reached!: () => void;
  const called = new Promise<void>((resolve) => (reached = resolve));
  // The container's side as a source whose call never answers on its own: only the signal ends it.
  const source: ToolsSource = {
    listTools: async () => ({ tools: [] }),
    listResources: async () => ({ resources: [] }),
    readResource: async () => ({ contents: [] }),
    callTool: (_params, options?: SourceCallOptions) =>
      new Promise((_resolve, reject) => {
        seen = options?.signal;
        reached();
        options?.signal?.addEventListener("abort", () => reject(new Error("given up")), { once: true });
      }),
    notifications: () => {
      const never: AsyncIterable<never> & { close(): void } = { close() {}, async *[Symbol.asyncIterator]() {} };
      return never;
    },
  };
  serving = await serveToolsHttp(source, { host: "127.0.0.1", port: 0 });
  const agent = new Client({ name: "agent", version: "1.0.0" });
  await agent.connect(new StreamableHTTPClientTransport(new URL(serving.url!)));
  const abort = new AbortController();
  const call = agent.callTool({ name: "slow", arguments: {} }, undefined, { signal: abort.signal });
  await called;
  expect(seen?.aborted).toBe(false);
  abort.abort("the agent gave up");
  await expect(call).rejects.toThrow();
  await expect.poll(() => seen?.aborted, { timeout: 30_000 }).toBe(true);
  await agent.close();
});
