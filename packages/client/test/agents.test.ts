// The provider's side of agent containers end to end, over real sockets, against the real proxy
// (`startProxy` from @diverge/server) and the example agent program, on both transports: begin, a
// message with a tool call answered by the provider's MCP server (through the scope's proxy-opened
// channels, or /requests on paths), a second message queued mid-loop and taken at a seam, a dequeue,
// and the chunk fold over what came. `proxyServesAgents` is found out at run time (a begin on a proxy
// of its own); until the proxy serves agents::begin these tests are skipped, never faked.
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { startExampleAgent, exampleAgentRoot, type ExampleAgent } from "@diverge/example-agent";
import type { AgenticLoopChunk } from "@diverge/codec";
import { beginPathsAgent, connectProxy, foldAll, mcpProviderHandlers, openContainer, relayToMcp, type Agent, type MultiplexedConnection, type PathsConnection } from "../src/index.js";
import { startToolServer, type ToolServer } from "../../example-agent/test/helpers.js";

interface Rig {
  readonly proxy: RunningProxy;
  readonly program: ExampleAgent;
  readonly tools: ToolServer;
  readonly agent: Agent;
  readonly seen: AgenticLoopChunk[];
}

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

/** A proxy in front of the example agent, with its program-facing /mcp where the agent looks for tools. */
async function proxyAndProgram(options: { secretsGate?: boolean } = {}): Promise<{ proxy: RunningProxy; program: ExampleAgent }> {
  let proxy: RunningProxy | undefined;
  const program = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${proxy!.programPort}/mcp` });
  closers.push(() => program.close());
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, root: exampleAgentRoot, secretsGate: options.secretsGate, log: () => {} });
  closers.push(() => proxy!.close());
  return { proxy, program };
}

/** Whether this proxy serves agents::begin: a begin on a proxy of its own answers Begun. */
async function probeProxyServesAgents(): Promise<boolean> {
  const { proxy } = await proxyAndProgram();
  try {
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { timeoutMs: 60_000 });
    try {
      await connection.beginAgent({ arguments: {} }, { timeoutMs: 60_000 });
      return true;
    } catch {
      return false;
    } finally {
      await connection.close();
    }
  } finally {
    for (const close of closers.splice(0).reverse()) await close().catch(() => {});
  }
}

// Found out before the tests are collected, so that `skipIf` reads it.
const proxyServesAgents = await probeProxyServesAgents();
if (!proxyServesAgents) console.warn("agents.test.ts: the proxy does not serve agents::begin yet; the end-to-end tests are skipped");

async function rig(transport: "multiplexed" | "paths"): Promise<Rig> {
  const tools = await startToolServer();
  closers.push(() => tools.close());
  const relay = relayToMcp({ url: tools.url });
  closers.push(() => relay.close());
  let agent: Agent;
  let proxy: RunningProxy;
  let program: ExampleAgent;
  if (transport === "multiplexed") {
    ({ proxy, program } = await proxyAndProgram());
    const connection: MultiplexedConnection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { handlers: mcpProviderHandlers(relay) });
    closers.push(() => connection.close());
    agent = await connection.beginAgent({ arguments: { name: "tester" } });
    const info = await agent.info();
    expect(info?.frontMatter.title).toBe("Example agent");
    expect(info?.frontMatter.secrets).toEqual(["API_KEY"]);
    await agent.feedSecrets({ API_KEY: "k" });
  } else {
    // No path carries a secrets feed: the proxy runs without the gate, as for /tool/*.
    ({ proxy, program } = await proxyAndProgram({ secretsGate: false }));
    const answering: PathsConnection = connectProxy(`ws://127.0.0.1:${proxy.port}/`, relay);
    closers.push(() => answering.close());
    await answering.whenConnected({ timeoutMs: 60_000 });
    const paths = await beginPathsAgent(`ws://127.0.0.1:${proxy.port}/`, { arguments: { name: "tester" } });
    closers.push(() => paths.close());
    agent = paths;
    expect((await agent.info())?.frontMatter.arguments).toMatchObject({ type: "object" });
  }
  expect(program.registered).toMatchObject({ name: "tester" });
  const seen: AgenticLoopChunk[] = [];
  void (async () => {
    for await (const chunk of agent.chunks()) seen.push(chunk);
  })();
  return { proxy, program, tools, agent, seen };
}

/** Resolves once a chunk that `predicate` takes has come (the loop's own pace, no sleeping). */
async function until(seen: AgenticLoopChunk[], predicate: (chunk: AgenticLoopChunk) => boolean): Promise<void> {
  while (!seen.some(predicate)) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe.each(["multiplexed", "paths"] as const)("an agent container on %s", (transport) => {
  it.skipIf(!proxyServesAgents)("begins, takes a message with a tool call, streams its chunks and folds them", async () => {
    const { agent, seen, tools } = await rig(transport);
    expect(await agent.enqueue("k1", 'hello\ntool:echo {"text":"hi there"}')).toBe("delivered");
    await until(seen, (chunk) => chunk.type === "usage");
    await agent.settled({ idleMs: 500 });
    expect(tools.calls).toEqual(['echo {"text":"hi there"}']);
    const { messages, usage } = foldAll(seen);
    expect(messages[0]).toEqual({ kind: "user", key: "k1", content: [{ type: "text", text: 'hello\ntool:echo {"text":"hi there"}' }] });
    const call = messages.find((message) => message.kind === "tool_call");
    expect(call).toMatchObject({ kind: "tool_call", name: "echo", parsed: { text: "hi there" }, complete: true });
    const response = messages.find((message) => message.kind === "tool_response");
    expect(response).toMatchObject({ kind: "tool_response", id: (call as { id: string }).id, content: [{ type: "text", text: "hi there" }], isError: false });
    expect(messages.some((message) => message.kind === "text" && message.text.includes("You said: hello"))).toBe(true);
    expect(messages.some((message) => message.kind === "reasoning")).toBe(true);
    expect(usage.total_tokens).toBeGreaterThan(0);
  }, 120_000);

  it.skipIf(!proxyServesAgents)("a second message queued mid-loop is taken at a seam; a dequeue withdraws a waiting one", async () => {
    const { agent, seen, program } = await rig(transport);
    const first = agent.enqueue("k1", "pause:a\nfirst");
    await program.whenPaused("a");
    expect(await first).toBe("delivered");
    const second = agent.enqueue("k2", "second");
    await program.whenHeld(1);
    // A third, then withdrawn before a seam takes it.
    const third = agent.enqueue("k3", "third");
    // The proxy hands the loop one message at a time (k3 waits in its queue); the program holds every one.
    if (transport === "paths") await program.whenHeld(2);
    if (transport === "multiplexed") {
      expect(await agent.dequeue("k3")).toBe(true);
      expect(await third).toBe("dequeued");
      expect(await agent.dequeue("nothing-under-this")).toBe(false);
    } else {
      // /agent/dequeue has no key: it withdraws the program's whole queue (k2 with k3).
      expect(await agent.dequeue("k3")).toBe(true);
      expect(await third).toBe("dequeued");
      expect(await second).toBe("dequeued");
      const again = agent.enqueue("k2", "second");
      await program.whenHeld(1);
      program.release("a");
      expect(await again).toBe("delivered");
    }
    program.release("a");
    if (transport === "multiplexed") expect(await second).toBe("delivered");
    await agent.settled({ idleMs: 500 });
    const users = foldAll(seen).messages.filter((message) => message.kind === "user");
    expect(users.map((message) => (message as { key: string }).key)).toEqual(["k1", "k2"]);
    // k2 landed at a seam of k1's loop: after k1's output, before its own.
    const firstK2 = seen.findIndex((chunk) => chunk.type === "user_text_content" && chunk.key === "k2");
    expect(seen.slice(0, firstK2).some((chunk) => chunk.type === "assistant_text_content")).toBe(true);
    expect(program.runs).toBe(1);
  }, 120_000);

  it.skipIf(!proxyServesAgents)("a message the program refuses rejects with its words; a loop's end starts the next on what waits", async () => {
    const { agent, program } = await rig(transport);
    await expect(agent.enqueue("bad", "refuse:not today")).rejects.toMatchObject({ name: "ContainerError", detail: { variant: "Refused" } });
    expect(await agent.enqueue("ok", "fine")).toBe("delivered");
    await agent.settled({ idleMs: 500 });
    expect(await agent.enqueue("again", "once more")).toBe("delivered");
    await agent.settled({ idleMs: 500 });
    expect(program.runs).toBe(2);
  }, 120_000);

});

describe("the multiplexed connection", () => {
  it.skipIf(!proxyServesAgents)("one begin per connection, whichever family: a second begin is refused and the agent goes on", async () => {
    const { proxy, program } = await proxyAndProgram();
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`);
    closers.push(() => connection.close());
    const agent = await connection.beginAgent({ arguments: {} });
    await expect(connection.beginAgent({ arguments: {} })).rejects.toMatchObject({ detail: { variant: "Refused", error: { kind: "begun" } } });
    // (The value is informative only: the tools family words it its own way.)
    await expect(connection.beginTools({ arguments: {} })).rejects.toMatchObject({ detail: { variant: "Refused" } });
    // The connection's info and secrets are the agent's (tags 1 and 5 of its table); tools' channels are not asked on it.
    expect((await connection.info())?.frontMatter.title).toBe("Example agent");
    await connection.feedSecrets({ API_KEY: "k" });
    await expect(connection.mcp.listTools()).rejects.toMatchObject({ detail: { variant: "NotBegun" } });
    expect(await agent.enqueue("k", "still here")).toBe("delivered");
    expect(program.calls.filter((call) => call === "POST /register")).toHaveLength(1);
  }, 120_000);
});
