// The example agent's HTTP contract (agents.md §8), driven with fetch over real sockets, its tool calls
// answered by a real MCP server (the SDK's McpServer on loopback Streamable HTTP).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ARGUMENTS_SCHEMA, CHUNK_TYPES, exampleAgentRoot, startExampleAgent, type ExampleAgent, type ExampleAgentOptions } from "../src/index.js";
import { isChunk, joined, message, post, startRun, startToolServer, text, type ToolServer } from "./helpers.js";

let tools: ToolServer;
const agents: ExampleAgent[] = [];
beforeAll(async () => {
  tools = await startToolServer();
});
afterAll(async () => {
  await tools.close();
});
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

/** A fresh agent calling the test's MCP server, registered with `args` unless `args` is `false`. */
async function agentWith(args: unknown = {}, options: ExampleAgentOptions = {}): Promise<ExampleAgent> {
  const agent = await startExampleAgent({ mcpUrl: tools.url, ...options });
  agents.push(agent);
  if (args !== false) expect((await post(agent.url, "/register", { arguments: args })).status).toBe(200);
  return agent;
}

const enqueue = (agent: ExampleAgent, key: string, ...lines: string[]) => post(agent.url, "/enqueue", message(key, ...lines));
const fate = async (answer: Promise<Response>) => {
  const response = await answer;
  expect(response.status).toBe(200);
  return (await response.json()) as { type: string };
};

describe("register, schema and secrets", () => {
  it("answers the golden register with no tools, and a second register with 409 registered", async () => {
    const agent = await agentWith(false);
    const first = await post(agent.url, "/register", { arguments: { model: "m" } });
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("application/json");
    expect(await first.text()).toBe('{"tools":[]}');
    expect(agent.registered).toEqual({ model: "m" });
    const second = await post(agent.url, "/register", { arguments: { greeting: "Hi" } });
    expect(second.status).toBe(409);
    expect(await second.json()).toEqual({ kind: "registered" });
    expect(agent.registered).toEqual({ model: "m" });
  });

  it("declares the greeter tool as a §3.3 Tool when registered with a greeting", async () => {
    const agent = await agentWith(false);
    const answer = (await (await post(agent.url, "/register", { arguments: { greeting: "Salut" } })).json()) as { tools: Record<string, unknown>[] };
    expect(answer.tools).toHaveLength(1);
    const [tool] = answer.tools;
    expect(Object.keys(tool!)).toEqual(["name", "image", "memory", "disk", "arguments", "instructions"]);
    expect(tool).toMatchObject({ name: "greeter", arguments: { greeting: "Salut" } });
    expect(tool!.image).toEqual({ name: "diverge/example-greeter", digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    expect(Number.isSafeInteger(tool!.memory) && Number.isSafeInteger(tool!.disk)).toBe(true);
  });

  it("takes null arguments, refuses arguments it cannot read (staying unregistered) and bodies that are not JSON objects", async () => {
    const agent = await agentWith(false);
    for (const args of [5, "x", [1], { greeting: 3 }, { misbehave: ["no-such-mode"] }]) {
      const refused = await post(agent.url, "/register", { arguments: args });
      expect(refused.status).toBe(422);
      expect(await refused.json()).toMatchObject({ kind: "arguments" });
    }
    expect((await post(agent.url, "/register", "not json")).status).toBe(400);
    expect((await post(agent.url, "/register", [1])).status).toBe(400);
    expect(agent.registered).toBeUndefined();
    expect((await post(agent.url, "/register", { arguments: null })).status).toBe(200);
    expect((await post(agent.url, "/register", { arguments: null })).status).toBe(409);
  });

  it("answers GET /schema with the arguments' schema, the same as DIVERGE.md's front matter", async () => {
    const agent = await agentWith(false);
    const schema = await fetch(`${agent.url}/schema`);
    expect(schema.status).toBe(200);
    expect(await schema.json()).toEqual(ARGUMENTS_SCHEMA);
    const front = /^---\n([\s\S]*?)\n---\n/.exec(readFileSync(join(exampleAgentRoot, "DIVERGE.md"), "utf8"))![1]!;
    const line = front.split("\n").find((entry) => entry.startsWith("arguments: "))!;
    expect(JSON.parse(line.slice("arguments: ".length))).toEqual(ARGUMENTS_SCHEMA);
  });

  it("takes its secrets only when every required one is there, naming what is missing and no value; a feed may come again", async () => {
    const agent = await agentWith(false);
    const refused = await post(agent.url, "/secrets", { OTHER: "v4lue" });
    expect(refused.status).toBe(422);
    const body = await refused.text();
    expect(body).toContain("API_KEY");
    expect(body).not.toContain("v4lue");
    expect(agent.fed).toBe(false);
    expect((await post(agent.url, "/secrets", { API_KEY: "k" })).status).toBe(200);
    expect((await post(agent.url, "/secrets", { API_KEY: "k2" })).status).toBe(200);
    expect(agent.fed).toBe(true);
    const none = await agentWith(false, { requiredSecrets: [] });
    expect((await post(none.url, "/secrets", {})).status).toBe(200);
  });

  it("answers 404 off the contract and 405 for a wrong method on it", async () => {
    const agent = await agentWith(false);
    expect((await fetch(`${agent.url}/nowhere`)).status).toBe(404);
    expect((await fetch(`${agent.url}/run`)).status).toBe(405);
    expect(agent.calls).toEqual(["GET /nowhere", "GET /run"]);
  });
});

describe("POST /run", () => {
  it("refuses to run unregistered, with {kind: unregistered}", async () => {
    const agent = await agentWith(false);
    const refused = await post(agent.url, "/run", { messages: [message("k1", "hello")] });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toEqual({ kind: "unregistered" });
  });

  it("streams the golden loop: user parts first, reasoning and text in deltas, usage, then a clean end", async () => {
    const agent = await agentWith({ model: "m" });
    const { response, stream } = await startRun(agent.url, [{ key: "k1", content: [{ type: "text", text: "hello" }] }]);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(await stream.next()).toBe('{"type":"user_text_content","key":"k1","text":"hello"}');
    const chunks = await stream.rest();
    expect(chunks.every(isChunk)).toBe(true);
    const reasoning = chunks.filter((chunk) => chunk.type === "assistant_reasoning");
    expect(reasoning.length).toBeGreaterThan(1);
    expect(joined(chunks, "assistant_reasoning")).toBe('example-agent reads the message under "k1": 1 step.');
    expect(chunks.filter((chunk) => chunk.type === "assistant_text_content").length).toBeGreaterThan(1);
    expect(joined(chunks, "assistant_text_content")).toBe("You said: hello");
    const completion = chunks.filter((chunk) => chunk.type !== "usage").length;
    expect(chunks.at(-1)).toEqual({ type: "usage", completion_tokens: completion, prompt_tokens: 1, total_tokens: completion + 1 });
    await agent.whenIdle();
    expect(agent.runs).toBe(1);
  });

  it("starts on every message of the batch: all their user parts first, then a turn each in order", async () => {
    const agent = await agentWith({ name: "Ada" });
    const { stream } = await startRun(agent.url, [message("a", "one"), { key: "b", content: [text("two"), text("three")] }]);
    const chunks = await stream.rest();
    expect(chunks.slice(0, 3)).toEqual([
      { type: "user_text_content", key: "a", text: "one" },
      { type: "user_text_content", key: "b", text: "two" },
      { type: "user_text_content", key: "b", text: "three" },
    ]);
    expect(joined(chunks, "assistant_text_content")).toBe("You said: oneYou said: twoYou said: three");
    expect(joined(chunks, "assistant_reasoning")).toBe('Ada reads the message under "a": 1 step.Ada reads the message under "b": 2 steps.');
    expect(chunks.filter((chunk) => chunk.type === "usage")).toHaveLength(2);
  });

  it("calls a provider tool through MCP: tool-call deltas under one id, then the tool's result", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", 'tool:add {"a": 2, "b": 3}')]);
    const chunks = await stream.rest();
    expect(chunks.every(isChunk)).toBe(true);
    const calls = chunks.filter((chunk) => chunk.type === "assistant_tool_call");
    expect(calls.length).toBeGreaterThan(1);
    expect(new Set(calls.map((chunk) => chunk.id))).toEqual(new Set(["call_1_1"]));
    expect(calls.every((chunk) => chunk.name === "add")).toBe(true);
    expect(JSON.parse(calls.map((chunk) => chunk.arguments).join(""))).toEqual({ a: 2, b: 3 });
    const result = chunks.find((chunk) => chunk.type === "tool_response");
    expect(result).toEqual({ type: "tool_response", id: "call_1_1", content: [{ type: "text", text: "5" }], structuredContent: { sum: 5 } });
    expect(chunks.indexOf(result!)).toBeGreaterThan(chunks.indexOf(calls.at(-1)!));
    expect(joined(chunks, "assistant_text_content")).toBe("add answered: 5");
    expect(tools.calls).toContain('add {"a":2,"b":3}');
  });

  it("lists the provider's tools, and reports a tool that fails or an MCP endpoint it cannot reach as an isError result, never a broken stream", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "tools", 'tool:echo {"text":"hi"}', "tool:nope {}")]);
    const chunks = await stream.rest();
    expect(joined(chunks, "assistant_text_content")).toContain("The provider's tools: add, echo.");
    const results = chunks.filter((chunk) => chunk.type === "tool_response");
    expect(results.map((chunk) => chunk.id)).toEqual(["call_1_1", "call_1_2"]);
    expect(results[0]).toMatchObject({ content: [{ type: "text", text: "hi" }] });
    expect(results[1]).toMatchObject({ isError: true });

    const unreachable = await agentWith({}, { mcpUrl: "http://127.0.0.1:9/mcp" });
    const other = await startRun(unreachable.url, [message("k1", "tool:add {}")]);
    const failed = (await other.stream.rest()).find((chunk) => chunk.type === "tool_response");
    expect(failed).toMatchObject({ id: "call_1_1", isError: true, content: [{ type: "text", text: expect.stringContaining("the tool call failed") }] });
  });

  it("lands every kind of content block as its user part, and emits every chunk kind of §7.2 when asked", async () => {
    const agent = await agentWith({});
    const image = { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" };
    const audio = { type: "audio", data: "UklGRg==", mimeType: "audio/wav" };
    const resource = { type: "resource", resource: { uri: "file:///a.txt", mimeType: "text/plain", text: "A" } };
    const link = { type: "resource_link", uri: "file:///b.txt", name: "b" };
    const { stream } = await startRun(agent.url, [
      { key: "k1", content: [text("image\naudio\nrefusal:not that\nnotify:heads up\ntool:add {\"a\":1,\"b\":1}\nfatal:out of script"), image, audio, resource, link] },
    ]);
    const chunks = await stream.rest();
    expect(chunks.every(isChunk)).toBe(true);
    expect(chunks.slice(1, 5)).toEqual([
      { type: "user_image_content", key: "k1", data: image.data, mimeType: "image/png" },
      { type: "user_audio_content", key: "k1", data: audio.data, mimeType: "audio/wav" },
      { type: "user_resource", key: "k1", resource: resource.resource },
      { type: "user_resource_link", key: "k1", uri: "file:///b.txt", name: "b" },
    ]);
    expect(new Set(chunks.map((chunk) => chunk.type))).toEqual(new Set(CHUNK_TYPES.filter((type) => type !== "usage")));
    expect(joined(chunks, "assistant_refusal")).toBe("not that");
    expect(chunks.find((chunk) => chunk.type === "notification")).toEqual({ type: "notification", is_fatal: false, message: "heads up" });
    // fatal ends the loop there: a fatal notification is the last chunk (the blocks after it are never described).
    expect(chunks.at(-1)).toEqual({ type: "notification", is_fatal: true, message: "out of script" });
    expect(joined(chunks, "assistant_text_content")).not.toContain("I see");
    for (const chunk of chunks.filter((entry) => entry.type === "assistant_image_content" || entry.type === "assistant_audio_content")) {
      expect(Buffer.from((chunk as { data: string }).data, "base64").length).toBeGreaterThan(0);
    }
  });

  it("runs a sub-agent whose chunks carry the spawning call's id as parent_tool_call_id", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "spawn:the sums", "after")]);
    const chunks = await stream.rest();
    expect(chunks.every(isChunk)).toBe(true);
    const call = chunks.find((chunk) => chunk.type === "assistant_tool_call")!;
    expect(call).toMatchObject({ id: "call_1_1", name: "subagent" });
    const children = chunks.filter((chunk) => "parent_tool_call_id" in chunk);
    expect(new Set(children.map((chunk) => chunk.type))).toEqual(new Set(["assistant_reasoning", "assistant_text_content"]));
    expect(children.every((chunk) => (chunk as { parent_tool_call_id: string }).parent_tool_call_id === "call_1_1")).toBe(true);
    expect(joined(children, "assistant_text_content")).toBe("Done: the sums.");
    expect(chunks.find((chunk) => chunk.type === "tool_response")).toEqual({ type: "tool_response", id: "call_1_1", content: [{ type: "text", text: "Done: the sums." }] });
    const main = chunks.filter((chunk) => !("parent_tool_call_id" in chunk));
    expect(joined(main, "assistant_text_content")).toBe("You said: after");
  });

  it("describes non-text blocks in its text, and sleeps and seams on request", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [{ key: "k1", content: [text("sleep:1\nseam"), { type: "resource_link", uri: "file:///b", name: "b" }] }]);
    const chunks = await stream.rest();
    expect(joined(chunks, "assistant_text_content")).toBe("I see a link to file:///b (b).");
  });

  it("streams burst:N as N text chunks, in order, then the turn goes on", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "burst:500\nafter")]);
    const chunks = await stream.rest();
    const texts = chunks.filter((chunk) => chunk.type === "assistant_text_content").map((chunk) => (chunk as { text: string }).text);
    expect(texts.slice(0, 500)).toEqual(Array.from({ length: 500 }, (_, n) => `${n} `));
    expect(texts.slice(500).join("")).toBe("You said: after");
    expect(chunks.at(-1)).toMatchObject({ type: "usage", completion_tokens: expect.any(Number) });
    expect((chunks.at(-1) as { completion_tokens: number }).completion_tokens).toBeGreaterThanOrEqual(500);
  });

  it("refuses a run already in progress, and content it cannot take (4xx, nothing ran)", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause")]);
    await agent.whenPaused();
    const busy = await post(agent.url, "/run", { messages: [message("k2", "hi")] });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ kind: "running" });
    agent.release();
    expect(await stream.drain()).toBe("clean");
    await agent.whenIdle();

    const refusals: [unknown, number][] = [
      [{ key: "k", content: [] }, 422],
      [{ key: "k", content: [{ type: "video", data: "x" }] }, 422],
      [{ key: "k", content: [{ type: "text" }] }, 422],
      [message("k", "refuse:no thanks"), 422],
      [message("k", "tool:add {not json"), 422],
      [message("k", "tool:add [1]"), 422],
      [message("k", "sleep:soon"), 422],
      [message("k", "burst:many"), 422],
      [{ key: 1, content: [text("x")] }, 400],
      [{ content: [text("x")] }, 400],
    ];
    for (const [refused, status] of refusals) {
      const answer = await post(agent.url, "/run", { messages: [message("ok", "fine"), refused] });
      expect(answer.status, JSON.stringify(refused)).toBe(status);
    }
    const named = await post(agent.url, "/run", { messages: [message("k", "refuse:no thanks")] });
    expect(await named.json()).toEqual({ kind: "refused", error: "no thanks" });
    expect((await post(agent.url, "/run", { messages: [] })).status).toBe(400);
    expect((await post(agent.url, "/run", "{")).status).toBe(400);
    expect(agent.runs).toBe(1);
  });

  it("ends the loop when its caller leaves, and every held message then misses it", async () => {
    const agent = await agentWith({});
    const caller = new AbortController();
    const { stream } = await startRun(agent.url, [message("k1", "pause")], { signal: caller.signal });
    await agent.whenPaused();
    const held = enqueue(agent, "k2", "hi");
    await agent.whenHeld(1);
    caller.abort();
    expect(await stream.drain()).toBe("abrupt");
    expect(await fate(held)).toEqual({ type: "missed" });
    await agent.whenIdle();
    expect(agent.paused).toEqual([]);
  });
});

describe("enqueue seams and dequeue", () => {
  it("holds a message sent mid-loop and delivers it at the next seam, where it lands as its user parts and gets a turn", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause:first", "hello")]);
    const before = await stream.until((chunk) => chunk.type === "notification");
    expect(before.at(-1)).toEqual({ type: "notification", is_fatal: false, message: { paused: "first" } });
    await agent.whenPaused("first");
    const delivered = enqueue(agent, "k2", "second");
    await agent.whenHeld(1);
    expect(agent.held).toEqual(["k2"]);
    expect(agent.release("other")).toBe(0);
    expect(agent.release("first")).toBe(1);
    expect(await fate(delivered)).toEqual({ type: "delivered" });
    const after = await stream.rest();
    const landed = after.findIndex((chunk) => chunk.type === "user_text_content");
    expect(after[landed]).toEqual({ type: "user_text_content", key: "k2", text: "second" });
    // It landed at the seam that closes k1's turn: after k1's text and usage, before k2's turn.
    expect(joined(after.slice(0, landed), "assistant_text_content")).toBe("You said: hello");
    expect(after[landed - 1]?.type).toBe("usage");
    expect(joined(after.slice(landed), "assistant_text_content")).toBe("You said: second");
    expect(joined(after.slice(landed), "assistant_reasoning")).toBe('example-agent reads the message under "k2": 1 step.');
    expect(agent.held).toEqual([]);
  });

  it("takes a held message at the seam beside a tool's result", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause", 'tool:echo {"text":"x"}', "after")]);
    await agent.whenPaused();
    const delivered = enqueue(agent, "k2", "second");
    await agent.whenHeld(1);
    agent.release();
    expect(await fate(delivered)).toEqual({ type: "delivered" });
    const chunks = await stream.rest();
    const result = chunks.findIndex((chunk) => chunk.type === "tool_response");
    const landed = chunks.findIndex((chunk) => chunk.type === "user_text_content" && chunk.key === "k2");
    // Between the result and the landing: only the agent's words on the result.
    expect(chunks.slice(result + 1, landed).every((chunk) => chunk.type === "assistant_text_content")).toBe(true);
    expect(joined(chunks.slice(result + 1, landed), "assistant_text_content")).toBe("echo answered: x");
    // k1's remaining step ("after") runs before k2's turn.
    expect(joined(chunks, "assistant_text_content")).toBe("echo answered: xYou said: afterYou said: second");
  });

  it("dequeue withdraws every held message under its key (each answering dequeued) and answers empty when none waits", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause")]);
    await agent.whenPaused();
    const first = enqueue(agent, "k2", "a");
    await agent.whenHeld(1);
    const second = enqueue(agent, "k2", "b");
    await agent.whenHeld(2);
    const third = enqueue(agent, "k3", "c");
    await agent.whenHeld(3);
    expect(agent.held).toEqual(["k2", "k2", "k3"]);
    const withdrawn = await post(agent.url, "/dequeue", { key: "k2" });
    expect(withdrawn.status).toBe(200);
    expect(await withdrawn.json()).toEqual({ type: "dequeued" });
    expect(await fate(first)).toEqual({ type: "dequeued" });
    expect(await fate(second)).toEqual({ type: "dequeued" });
    expect(agent.held).toEqual(["k3"]);
    expect(await (await post(agent.url, "/dequeue", { key: "k2" })).json()).toEqual({ type: "empty" });
    expect(await (await post(agent.url, "/dequeue", { key: "nobody" })).json()).toEqual({ type: "empty" });
    expect((await post(agent.url, "/dequeue", { nokey: 1 })).status).toBe(400);
    agent.release();
    expect(await fate(third)).toEqual({ type: "delivered" });
    const chunks = await stream.rest();
    expect(chunks.filter((chunk) => chunk.type === "user_text_content").map((chunk) => (chunk as { key: string }).key)).toEqual(["k1", "k3"]);
    // A message the loop took stays taken.
    expect(await (await post(agent.url, "/dequeue", { key: "k3" })).json()).toEqual({ type: "empty" });
  });

  it("answers missed for a message held when the loop ends without a seam, and for one sent when no loop runs", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause", "stop", "never said")]);
    await agent.whenPaused();
    const missed = enqueue(agent, "k2", "late");
    await agent.whenHeld(1);
    agent.release();
    expect(await fate(missed)).toEqual({ type: "missed" });
    const chunks = await stream.rest();
    expect(chunks.some((chunk) => "key" in chunk && chunk.key === "k2")).toBe(false);
    expect(joined(chunks, "assistant_text_content")).toBe("");
    await agent.whenIdle();
    expect(await fate(enqueue(agent, "k3", "nobody home"))).toEqual({ type: "missed" });
    const unregistered = await agentWith(false);
    expect(await fate(enqueue(unregistered, "k4", "x"))).toEqual({ type: "missed" });
  });

  it("answers missed for a message held when a fatal notification ends the loop", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause", "fatal:gave up")]);
    await agent.whenPaused();
    const missed = enqueue(agent, "k2", "x");
    await agent.whenHeld(1);
    agent.release();
    expect(await fate(missed)).toEqual({ type: "missed" });
    expect((await stream.rest()).at(-1)).toEqual({ type: "notification", is_fatal: true, message: "gave up" });
  });

  it("refuses content it cannot take at enqueue (4xx, final), running or not", async () => {
    const agent = await agentWith({});
    for (const [body, status] of [
      [{ key: "k", content: [] }, 422],
      [message("k", "refuse"), 422],
      [{ key: "k", content: [{ type: "nope" }] }, 422],
      [{ key: "k" }, 400],
      ["nope", 400],
    ] as const) {
      const answer = await post(agent.url, "/enqueue", body);
      expect(answer.status, JSON.stringify(body)).toBe(status);
    }
    const { stream } = await startRun(agent.url, [message("k1", "pause")]);
    await agent.whenPaused();
    const refused = await post(agent.url, "/enqueue", message("k2", "refuse:not now"));
    expect(refused.status).toBe(422);
    expect(await refused.json()).toEqual({ kind: "refused", error: "not now" });
    expect(agent.held).toEqual([]);
    agent.release();
    await stream.rest();
  });

  it("forgets a held message whose caller gave up", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause")]);
    await agent.whenPaused();
    const caller = new AbortController();
    const kept = enqueue(agent, "k2", "x");
    void post(agent.url, "/enqueue", message("k2", "x"), { signal: caller.signal }).catch(() => {});
    await agent.whenHeld(2);
    caller.abort();
    await agent.until((it) => it.held.length === 1);
    agent.release();
    expect(await fate(kept)).toEqual({ type: "delivered" });
    expect((await stream.rest()).filter((chunk) => chunk.type === "user_text_content").map((chunk) => (chunk as { key: string }).key)).toEqual(["k1", "k2"]);
  });
});

describe("/example/*: watching and steering over HTTP", () => {
  it("waits for held messages and pauses, and releases a pause, over HTTP", async () => {
    const agent = await agentWith({});
    const { stream } = await startRun(agent.url, [message("k1", "pause:p1")]);
    const paused = (await (await fetch(`${agent.url}/example/paused?label=p1`)).json()) as { paused: string[] };
    expect(paused.paused).toEqual(["p1"]);
    const delivered = enqueue(agent, "k2", "x");
    const held = (await (await fetch(`${agent.url}/example/held?count=1`)).json()) as { held: string[]; running: boolean };
    expect(held).toMatchObject({ held: ["k2"], running: true, registered: true, runs: 1 });
    expect(await (await post(agent.url, "/example/release", { label: "p1" })).json()).toEqual({ released: 1 });
    expect(await fate(delivered)).toEqual({ type: "delivered" });
    await stream.rest();
    await agent.whenIdle();
    const state = await (await fetch(`${agent.url}/example/state`)).json();
    expect(state).toMatchObject({ running: false, held: [], paused: [], fed: false, arguments: {} });
  });
});
