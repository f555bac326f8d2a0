// `diverge agent`, `diverge connect --agent` and `diverge connect --serve-agent` as processes (the built
// dist/cli.js), against the real proxy and the example agent, on both transports; the A2A bridge with
// the A2A SDK's own client (send, stream, cancel). The chunk printer's lines without a proxy.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { startExampleAgent, exampleAgentRoot, type ExampleAgent } from "@diverge/example-agent";
import { A2AClient } from "@a2a-js/sdk/client";
import type { Message, MessageSendParams, Task, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { chunkPrinter } from "../src/commands/agent-print.js";
import { agentCardOf, beginPathsAgent, blocksOfParts, connectProxy, mcpProviderHandlers, openContainer, relayToMcp, serveAgentA2a, type Agent } from "../src/index.js";
import { startToolServer, type ToolServer } from "../../example-agent/test/helpers.js";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

async function proxyAndProgram(options: { secretsGate?: boolean } = {}): Promise<{ proxy: RunningProxy; program: ExampleAgent; tools: ToolServer; url: string }> {
  let proxy: RunningProxy | undefined;
  const program = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${proxy!.programPort}/mcp` });
  closers.push(() => program.close());
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, root: exampleAgentRoot, secretsGate: options.secretsGate, log: () => {} });
  closers.push(() => proxy!.close());
  const tools = await startToolServer();
  closers.push(() => tools.close());
  return { proxy, program, tools, url: `ws://127.0.0.1:${proxy.port}/` };
}

/** Whether this proxy serves agents::begin (a begin on a proxy of its own answers Begun); found out before collection. */
async function probe(): Promise<boolean> {
  const { url } = await proxyAndProgram();
  try {
    const connection = await openContainer(url, { timeoutMs: 60_000 });
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
const proxyServesAgents = await probe();
if (!proxyServesAgents) console.warn("agents-cli.test.ts: the proxy does not serve agents::begin yet; the end-to-end tests are skipped");

function run(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (data: Buffer) => (stdout += data.toString()));
    child.stderr.on("data", (data: Buffer) => (stderr += data.toString()));
    if (stdin !== undefined) child.stdin.end(stdin);
    else child.stdin.end();
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("the chunk printer", () => {
  it("streams text as text and says everything else in one line", () => {
    let out = "";
    const printer = chunkPrinter((text) => (out += text));
    printer.chunk({ type: "user_text_content", key: "k1", text: "hi\nthere" });
    printer.chunk({ type: "assistant_reasoning", text: "thinking " });
    printer.chunk({ type: "assistant_reasoning", text: "hard" });
    printer.chunk({ type: "assistant_text_content", text: "You " });
    printer.chunk({ type: "assistant_text_content", text: "said." });
    printer.chunk({ type: "assistant_tool_call", id: "c1", name: "echo", arguments: '{"text":' });
    printer.chunk({ type: "assistant_tool_call", id: "c1", name: "echo", arguments: '"x"}' });
    printer.chunk({ type: "tool_response", id: "c1", content: [{ type: "text", text: "x" }] });
    printer.chunk({ type: "notification", is_fatal: true, message: "done" });
    printer.chunk({ type: "usage", prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    printer.end();
    expect(out).toBe(['> k1: hi there', "(reasoning) thinking hard", "You said.", '→ echo {"text":"x"} (c1)', "← c1: x", "! fatal: done", "usage: prompt 1, completion 2, total 3", ""].join("\n"));
  });

  it("--json prints each chunk as one JSON line", () => {
    let out = "";
    const printer = chunkPrinter((text) => (out += text), { json: true });
    printer.chunk({ type: "assistant_text_content", text: "a" });
    printer.end();
    expect(out).toBe('{"type":"assistant_text_content","text":"a"}\n');
  });
});

describe("the A2A mapping without a proxy", () => {
  it("the card comes from DIVERGE.md's front matter and the declared tools; parts become content blocks", () => {
    const card = agentCardOf({ frontMatter: { title: "T", summary: "S" }, rawFrontMatter: {}, body: "" }, [{ name: "greeter", instructions: "Greets." }], "http://127.0.0.1:1/");
    expect(card).toMatchObject({ name: "T", description: "S", url: "http://127.0.0.1:1/", capabilities: { streaming: true }, skills: [{ id: "conversation" }, { id: "tool:greeter", description: "Greets." }] });
    expect(blocksOfParts([{ kind: "text", text: "a" }, { kind: "data", data: { b: 1 } }, { kind: "file", file: { bytes: "AA==", mimeType: "image/png" } }, { kind: "file", file: { uri: "https://x/y", name: "y" } }])).toEqual([
      { type: "text", text: "a" },
      { type: "text", text: '{"b":1}' },
      { type: "image", data: "AA==", mimeType: "image/png" },
      { type: "resource_link", uri: "https://x/y", name: "y" },
    ]);
  });
});

describe.each(["multiplexed", "paths"] as const)("on %s", (transport) => {
  it.skipIf(!proxyServesAgents)("diverge agent begins, sends the message, prints the loop folded (and --json as JSON lines), exits when it ends", async () => {
    const { url, tools } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const secretFlags = transport === "multiplexed" ? ["--secret-env", "API_KEY"] : [];
    let answering;
    if (transport === "paths") {
      // The program's tool calls come on /requests on this transport; this process answers them.
      const relay = relayToMcp({ url: tools.url });
      closers.push(() => relay.close());
      answering = connectProxy(url, relay);
      closers.push(() => answering!.close());
      await answering.whenConnected({ timeoutMs: 60_000 });
    }
    const result = await run(["agent", "--proxy", url, "--transport", transport, "--arguments", '{"name":"cli"}', ...secretFlags, ...(transport === "multiplexed" ? ["--mcp", tools.url] : []), "--key", "k1", "--idle-ms", "1500", 'hello\ntool:echo {"text":"from the cli"}'], { API_KEY: "k" });
    expect(result.stderr).toContain("k1: delivered");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("> k1: hello tool:echo");
    expect(result.stdout).toContain("You said: hello");
    expect(result.stdout).toMatch(/→ echo \{"text":"from the cli"\} \(call_1_1\)/);
    expect(result.stdout).toContain("← call_1_1: from the cli");
    expect(result.stdout).toMatch(/usage: prompt \d+, completion \d+, total \d+/);
    expect(tools.calls).toEqual(['echo {"text":"from the cli"}']);
  }, 120_000);

  it.skipIf(!proxyServesAgents)("diverge agent --json prints every chunk as one JSON line", async () => {
    const { url } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const result = await run(["agent", "--proxy", url, "--transport", transport, "--json", ...(transport === "multiplexed" ? ["--secret-env", "API_KEY"] : []), "--idle-ms", "1000", "--key", "j", "just text"], { API_KEY: "k" });
    expect(result.code).toBe(0);
    const chunks = result.stdout.trim().split("\n").map((line) => JSON.parse(line) as { type: string; key?: string });
    expect(chunks[0]).toEqual({ type: "user_text_content", key: "j", text: "just text" });
    expect(chunks.map((chunk) => chunk.type)).toContain("usage");
  }, 120_000);

  it.skipIf(!proxyServesAgents)("diverge connect --agent holds the agent: each stdin line a message, the loop on stdout", async () => {
    const { url, program } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const child: ChildProcess = spawn(process.execPath, [cli, "connect", "--proxy", url, "--transport", transport, "--agent", "--arguments", "{}", ...(transport === "multiplexed" ? ["--secret-env", "API_KEY"] : [])], { env: { ...process.env, API_KEY: "k" }, stdio: ["pipe", "pipe", "pipe"] });
    const closed = new Promise((resolve) => child.once("close", resolve));
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await closed;
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (data: Buffer) => (stdout += data.toString()));
    child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
    child.stdin!.write("first line\n");
    await waitFor(() => stdout.includes("You said: first line"));
    child.stdin!.write("second line\n");
    await waitFor(() => stdout.includes("You said: second line"));
    expect(stderr).toContain("stdin-1: delivered");
    expect(stdout).toContain("> stdin-2: second line");
    expect(program.runs).toBe(2);
    child.kill("SIGINT");
    expect(await closed).toBe(0);
  }, 120_000);

  it.skipIf(!proxyServesAgents)("diverge connect --serve-agent serves the container's agent to an A2A client", async () => {
    const { url } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const child: ChildProcess = spawn(process.execPath, [cli, "connect", "--proxy", url, "--transport", transport, "--serve-agent", "127.0.0.1:0", "--serve-agent-idle-ms", "700", "--arguments", "{}", ...(transport === "multiplexed" ? ["--secret-env", "API_KEY"] : [])], { env: { ...process.env, API_KEY: "k" }, stdio: ["pipe", "pipe", "pipe"] });
    const closed = new Promise((resolve) => child.once("close", resolve));
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await closed;
    });
    let stderr = "";
    child.stderr!.on("data", (data: Buffer) => (stderr += data.toString()));
    await waitFor(() => /serving the agent over A2A at (\S+) /.test(stderr));
    const served = /serving the agent over A2A at (\S+) /.exec(stderr)![1]!;
    const client = await A2AClient.fromCardUrl(`${served}.well-known/agent-card.json`);
    const sent = await client.sendMessage(params("over the command"));
    const task = (sent as { result: Task }).result;
    expect(task.status.state).toBe("input-required");
    // The final status says the whole text; the "response" artifact has it as the deltas came.
    expect(task.status.message?.parts[0]).toEqual({ kind: "text", text: "You said: over the command" });
    expect(task.artifacts?.find((artifact) => artifact.artifactId === "response")?.parts.map((part) => (part.kind === "text" ? part.text : "")).join("")).toBe("You said: over the command");
    child.kill("SIGINT");
    expect(await closed).toBe(0);
  }, 120_000);

  it.skipIf(!proxyServesAgents)("--serve-agent: the A2A SDK's client sends, streams and cancels", async () => {
    const { url, program, tools } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const relay = relayToMcp({ url: tools.url });
    closers.push(() => relay.close());
    let agent: Agent;
    if (transport === "multiplexed") {
      const connection = await openContainer(url, { handlers: mcpProviderHandlers(relay) });
      closers.push(() => connection.close());
      agent = await connection.beginAgent({ arguments: { greeting: "Hello" } });
      await agent.feedSecrets({ API_KEY: "k" });
    } else {
      const answering = connectProxy(url, relay);
      closers.push(() => answering.close());
      await answering.whenConnected({ timeoutMs: 60_000 });
      const paths = await beginPathsAgent(url, { arguments: { greeting: "Hello" } });
      closers.push(() => paths.close());
      agent = paths;
    }
    const serving = await serveAgentA2a(agent, { port: 0, idleMs: 700 });
    closers.push(() => serving.close());
    const client = await A2AClient.fromCardUrl(`${serving.url}.well-known/agent-card.json`);
    const card = await (await fetch(`${serving.url}.well-known/agent-card.json`)).json();
    expect(card).toMatchObject({ url: serving.url, capabilities: { streaming: true } });
    if (transport === "multiplexed") expect(card).toMatchObject({ name: "Example agent", skills: [{ id: "conversation" }, { id: "tool:greeter" }] });

    // message/send: blocking until the turn is over (the agent waits for input); the text is the task's artifact.
    const sent = await client.sendMessage(params("hello a2a"));
    expect("result" in sent).toBe(true);
    const task = (sent as { result: Task }).result;
    expect(task.kind).toBe("task");
    expect(task.status.state).toBe("input-required");
    expect(task.artifacts?.find((artifact) => artifact.artifactId === "response")?.parts.map((part) => (part.kind === "text" ? part.text : "")).join("")).toContain("You said: hello a2a");

    // message/stream: submitted, working, artifacts as the deltas come, a tool call's result, input-required.
    const states: string[] = [];
    let text = "";
    const statusTexts: string[] = [];
    for await (const event of client.sendMessageStream(params('look\ntool:echo {"text":"streamed"}'))) {
      if (event.kind === "task") states.push(event.status.state);
      if (event.kind === "status-update") {
        states.push(event.status.state);
        const part = event.status.message?.parts[0];
        if (part?.kind === "text") statusTexts.push(part.text);
      }
      if (event.kind === "artifact-update" && event.artifact.artifactId === "response") text += event.artifact.parts.map((part) => (part.kind === "text" ? part.text : "")).join("");
    }
    expect(states[0]).toBe("submitted");
    expect(states).toContain("working");
    expect(states.at(-1)).toBe("input-required");
    expect(text).toContain("You said: look");
    expect(statusTexts.some((line) => line.includes("echo") && line.includes("streamed"))).toBe(true);
    expect(tools.calls).toContain('echo {"text":"streamed"}');

    // tasks/cancel: a message waiting behind a paused loop is withdrawn (dequeue), its task canceled.
    const pausing = client.sendMessage(params("pause:c\nfirst"));
    await program.whenPaused("c");
    const waiting = client.sendMessageStream(params("never taken"));
    let waitingTask: string | undefined;
    const waitingStates: string[] = [];
    const consumed = (async () => {
      for await (const event of waiting) {
        if (event.kind === "task") waitingTask = event.id;
        if (event.kind === "task" || event.kind === "status-update") waitingStates.push((event as Task | TaskStatusUpdateEvent).status.state);
      }
    })();
    await waitFor(() => waitingTask !== undefined);
    if (transport === "paths") await program.whenHeld(1);
    const canceled = await client.cancelTask({ id: waitingTask! });
    expect((canceled as { result: Task }).result.status.state).toBe("canceled");
    await consumed;
    expect(waitingStates.at(-1)).toBe("canceled");
    program.release("c");
    expect(((await pausing) as { result: Task }).result.status.state).toBe("input-required");
  }, 120_000);

  it.skipIf(!proxyServesAgents)("--serve-agent: a turn ends waiting for input; a follow-up continues the task; a waiting task cancels", async () => {
    const { url } = await proxyAndProgram({ secretsGate: transport === "multiplexed" ? undefined : false });
    const agent = await beginAgentOver(transport, url);
    const serving = await serveAgentA2a(agent, { port: 0, idleMs: 700 });
    closers.push(() => serving.close());
    const client = await A2AClient.fromCardUrl(`${serving.url}.well-known/agent-card.json`);

    // A2A 0.3 keeps completed/canceled/failed/rejected final: a loop's end is the agent waiting for the
    // next message, so the task is input-required and a message with its id is the next turn of it.
    const first = ((await client.sendMessage(params("first turn"))) as { result: Task }).result;
    expect(first.status.state).toBe("input-required");
    const followUp: MessageSendParams = { message: { ...params("second turn").message, taskId: first.id, contextId: first.contextId } };
    const second = await client.sendMessage(followUp);
    expect("error" in second ? second.error : undefined).toBeUndefined();
    const continued = (second as { result: Task }).result;
    expect(continued.id).toBe(first.id);
    expect(continued.status.state).toBe("input-required");
    expect(continued.status.message?.parts[0]).toEqual({ kind: "text", text: "You said: second turn" });
    const userTexts = (continued.history ?? []).filter((message) => message.role === "user").map((message) => (message.parts[0]?.kind === "text" ? message.parts[0].text : ""));
    expect(userTexts).toEqual(["first turn", "second turn"]);

    // tasks/get: historyLength bounds the history it returns.
    const got = await client.getTask({ id: first.id, historyLength: 1 });
    expect((got as { result: Task }).result.history).toHaveLength(1);

    // tasks/cancel: a task waiting for input is canceled; canceled is final, so a further message is refused.
    const canceled = await client.cancelTask({ id: first.id });
    expect((canceled as { result: Task }).result.status.state).toBe("canceled");
    const refused = await client.sendMessage({ message: { ...params("too late").message, taskId: first.id } });
    expect("error" in refused ? refused.error.code : undefined).toBe(-32600);
  }, 120_000);
});

/** An agent begun on the proxy at `url` over `transport`, its provider side answered, nothing declared. */
async function beginAgentOver(transport: "multiplexed" | "paths", url: string): Promise<Agent> {
  if (transport === "multiplexed") {
    const connection = await openContainer(url);
    closers.push(() => connection.close());
    const agent = await connection.beginAgent({ arguments: {} });
    await agent.feedSecrets({ API_KEY: "k" });
    return agent;
  }
  const paths = await beginPathsAgent(url, { arguments: {} });
  closers.push(() => paths.close());
  return paths;
}

function params(text: string): MessageSendParams {
  const message: Message = { kind: "message", role: "user", messageId: crypto.randomUUID(), parts: [{ kind: "text", text }] };
  return { message };
}

async function waitFor(predicate: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
