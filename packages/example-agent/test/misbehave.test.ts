// The misbehaviour modes: each answers the way a broken program would, so the proxy's tests can check
// that garbage becomes the spec's error value. Switched per agent (options), per registration
// (`{"misbehave": [...]}` in the arguments) or at run time (`agent.misbehave`).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MISBEHAVIOURS, parseMisbehaviour, startExampleAgent, type ExampleAgent, type ExampleAgentOptions } from "../src/index.js";
import { isChunk, message, post, startRun, startToolServer, type ToolServer } from "./helpers.js";

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

async function agentWith(misbehave: string[], options: ExampleAgentOptions & { register?: boolean } = {}): Promise<ExampleAgent> {
  const agent = await startExampleAgent({ mcpUrl: tools.url, misbehave, ...options });
  agents.push(agent);
  if (options.register !== false) expect((await post(agent.url, "/register", { arguments: {} })).status).toBe(200);
  return agent;
}

const notJson = async (response: Response) => {
  const body = await response.text();
  expect(() => JSON.parse(body)).toThrow();
  return body;
};

/** Asks, waits until the agent holds the request unanswered, then gives up on it. */
async function hangs(agent: ExampleAgent, ask: (signal: AbortSignal) => Promise<Response>) {
  const caller = new AbortController();
  let settled = false;
  const answer = ask(caller.signal).finally(() => (settled = true));
  await agent.until((it) => it.hanging === 1);
  expect(settled).toBe(false);
  caller.abort();
  await expect(answer).rejects.toThrow();
  await agent.until((it) => it.hanging === 0);
}

describe("misbehaviour modes", () => {
  it("knows its modes and refuses others", () => {
    expect(parseMisbehaviour("run-5xx, exit-after:3").set).toEqual(new Set(["run-5xx"]));
    expect(parseMisbehaviour(["exit-after:3"]).exitAfter).toBe(3);
    expect(() => parseMisbehaviour("run-6xx")).toThrow(/unknown misbehaviour/);
    expect(() => parseMisbehaviour("exit-after:0")).toThrow();
    expect(MISBEHAVIOURS).toHaveLength(19);
  });

  it("register-5xx, register-not-json and register-bad-tools refuse the register (still unregistered); register-hang never answers", async () => {
    const failing = await agentWith(["register-5xx"], { register: false });
    const failed = await post(failing.url, "/register", { arguments: {} });
    expect(failed.status).toBe(500);
    await notJson(failed);
    expect(failing.registered).toBeUndefined();

    const garbled = await agentWith(["register-not-json"], { register: false });
    const text = await post(garbled.url, "/register", { arguments: {} });
    expect(text.status).toBe(200);
    await notJson(text);

    const badTools = await agentWith(["register-bad-tools"], { register: false });
    const bad = await post(badTools.url, "/register", { arguments: {} });
    expect(bad.status).toBe(200);
    expect(Array.isArray(((await bad.json()) as { tools: unknown }).tools)).toBe(false);
    expect(badTools.registered).toBeUndefined();

    const hanging = await agentWith(["register-hang"], { register: false });
    await hangs(hanging, (signal) => post(hanging.url, "/register", { arguments: {} }, { signal }));
  });

  it("schema-5xx and schema-not-json", async () => {
    const failing = await agentWith(["schema-5xx"]);
    expect((await fetch(`${failing.url}/schema`)).status).toBe(500);
    const garbled = await agentWith(["schema-not-json"]);
    const schema = await fetch(`${garbled.url}/schema`);
    expect(schema.status).toBe(200);
    await notJson(schema);
  });

  it("run-5xx answers 500 (nothing ran), run-not-sse a 2xx JSON body, run-hang nothing", async () => {
    const failing = await agentWith(["run-5xx"]);
    const failed = await post(failing.url, "/run", { messages: [message("k1", "hi")] });
    expect(failed.status).toBe(500);
    await notJson(failed);
    expect(failing.runs).toBe(0);

    const json = await agentWith(["run-not-sse"]);
    const answer = await post(json.url, "/run", { messages: [message("k1", "hi")] });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json");
    expect(await answer.json()).toEqual({ started: true });

    const hanging = await agentWith(["run-hang"]);
    await hangs(hanging, (signal) => post(hanging.url, "/run", { messages: [message("k1", "hi")] }, { signal }));
    expect(hanging.running).toBe(false);
  });

  it("garbage-sse: after the user parts, events whose data is not JSON, then a clean end", async () => {
    const agent = await agentWith(["garbage-sse"]);
    const { response, stream } = await startRun(agent.url, [message("k1", "hi")]);
    expect(response.status).toBe(200);
    expect(JSON.parse((await stream.next())!)).toEqual({ type: "user_text_content", key: "k1", text: "hi" });
    expect(await stream.drain()).toBe("clean");
    const garbage = stream.events.slice(1);
    expect(garbage.length).toBeGreaterThan(1);
    for (const event of garbage) expect(() => JSON.parse(event)).toThrow();
  });

  it("unknown-chunk: after the user parts, events that are JSON but none of the fourteen chunks", async () => {
    const agent = await agentWith(["unknown-chunk"]);
    const { stream } = await startRun(agent.url, [message("k1", "hi")]);
    expect(await stream.drain()).toBe("clean");
    const [first, ...rest] = stream.events.map((event) => JSON.parse(event) as unknown);
    expect(isChunk(first)).toBe(true);
    expect(rest.length).toBeGreaterThan(1);
    for (const value of rest) expect(isChunk(value)).toBe(false);
  });

  it("die-mid-stream: the stream breaks after the user parts and the first reasoning, and the program lives on", async () => {
    const agent = await agentWith(["die-mid-stream"]);
    const { response, stream } = await startRun(agent.url, [message("k1", "hi")]);
    expect(response.status).toBe(200);
    expect(await stream.drain()).toBe("abrupt");
    expect(stream.events.length).toBeGreaterThan(0);
    expect(stream.events.map((event) => (JSON.parse(event) as { type: string }).type)).toContain("user_text_content");
    await agent.whenIdle();
    // The program itself lives on: the next loop can run.
    agent.misbehave([]);
    const next = await startRun(agent.url, [message("k2", "again")]);
    expect(await next.stream.drain()).toBe("clean");
  });

  it("enqueue-5xx answers 503 at once; enqueue-missed answers missed while a loop runs", async () => {
    const failing = await agentWith(["enqueue-5xx"]);
    const failed = await post(failing.url, "/enqueue", message("k2", "x"));
    expect(failed.status).toBe(503);
    await notJson(failed);

    const missing = await agentWith([]);
    const { stream } = await startRun(missing.url, [message("k1", "pause")]);
    await missing.whenPaused();
    missing.misbehave(["enqueue-missed"]);
    expect(await (await post(missing.url, "/enqueue", message("k2", "x"))).json()).toEqual({ type: "missed" });
    missing.release();
    expect(await stream.drain()).toBe("clean");
  });

  it("fate-garbage and fate-not-json: a held message's fate, when known, is a 2xx that does not parse as a fate", async () => {
    for (const mode of ["fate-garbage", "fate-not-json"]) {
      const agent = await agentWith([mode]);
      const { stream } = await startRun(agent.url, [message("k1", "pause")]);
      await agent.whenPaused();
      const held = post(agent.url, "/enqueue", message("k2", "x"));
      await agent.whenHeld(1);
      agent.release();
      const answer = await held;
      expect(answer.status).toBe(200);
      if (mode === "fate-not-json") await notJson(answer);
      else expect(await answer.json()).toEqual({ type: "arrived", fate: "delivered" });
      expect(await stream.drain()).toBe("clean");
    }
  });

  it("dequeue-5xx, dequeue-garbage and dequeue-not-json", async () => {
    const failing = await agentWith(["dequeue-5xx"]);
    expect((await post(failing.url, "/dequeue", { key: "k" })).status).toBe(500);

    const garbled = await agentWith(["dequeue-garbage"]);
    const { stream } = await startRun(garbled.url, [message("k1", "pause")]);
    await garbled.whenPaused();
    const held = post(garbled.url, "/enqueue", message("k2", "x"));
    await garbled.whenHeld(1);
    const outcome = await post(garbled.url, "/dequeue", { key: "k2" });
    expect(outcome.status).toBe(200);
    expect(await outcome.json()).toEqual({ type: "perhaps", outcome: "dequeued" });
    // The withdrawal itself happened: the held message's own fate says so.
    expect(await (await held).json()).toEqual({ type: "dequeued" });
    garbled.release();
    await stream.drain();

    const text = await agentWith(["dequeue-not-json"]);
    const empty = await post(text.url, "/dequeue", { key: "k" });
    expect(empty.status).toBe(200);
    expect(await notJson(empty)).toBe("empty!");
  });

  it("takes modes from the register's arguments, for that registration", async () => {
    const agent = await agentWith([], { register: false });
    expect((await post(agent.url, "/register", { arguments: { misbehave: ["run-5xx"] } })).status).toBe(200);
    expect((await post(agent.url, "/run", { messages: [message("k1", "hi")] })).status).toBe(500);
    const refused = await agentWith([], { register: false });
    expect((await post(refused.url, "/register", { arguments: { misbehave: ["register-5xx"] } })).status).toBe(500);
    expect(refused.registered).toBeUndefined();
  });

  it("exit-after:N writes N events, then drops every connection and all its state, and comes back on the same port", async () => {
    const agent = await agentWith([]);
    const { stream } = await startRun(agent.url, [message("k1", "pause", "hello")]);
    await agent.whenPaused();
    const held = post(agent.url, "/enqueue", message("k2", "x")).then(
      () => "answered",
      () => "died",
    );
    await agent.whenHeld(1);
    const before = agent.events;
    agent.misbehave([`exit-after:${before + 2}`]);
    agent.release();
    expect(await stream.drain()).toBe("abrupt");
    expect(stream.events).toHaveLength(before + 2);
    // The held /enqueue dies with the program: no fate at all.
    expect(await held).toBe("died");
    await agent.whenRestarted(1);
    expect(agent.restarts).toBe(1);
    expect(agent.calls).toContain("restart");
    expect(agent.registered).toBeUndefined();
    const unregistered = await post(agent.url, "/run", { messages: [message("k1", "hi")] });
    expect(unregistered.status).toBe(409);
    expect(await unregistered.json()).toEqual({ kind: "unregistered" });
    // It will exit again after as many events: a program that keeps crashing.
    expect((await post(agent.url, "/register", { arguments: {} })).status).toBe(200);
    const again = await startRun(agent.url, [message("k1", "hello", "hello", "hello", "hello")]);
    expect(await again.stream.drain()).toBe("abrupt");
    await agent.whenRestarted(2);
    expect(again.stream.events).toHaveLength(before + 2);
  });

  it("exit-after:N calls onExit instead when given one", async () => {
    let exits = 0;
    const agent = await agentWith(["exit-after:1"], { onExit: () => (exits += 1) });
    const { stream } = await startRun(agent.url, [message("k1", "hi")]);
    expect(await stream.next()).toBeDefined();
    await agent.until(() => exits === 1);
    expect(agent.restarts).toBe(0);
  });
});
