// agents::begin on the multiplexed connection against the example agent program, over real sockets:
// the begin, the run loop's every event (agents.md §6), the provider channels, the secrets gate, one
// begin per connection whichever family, bad input, and nothing left waiting when the connection ends.
import { describe, expect, it } from "vitest";
import { decodeAgentsBeginServerChannelRequest, decodeInfoAnswer, decodeToolsBeginResponse, encodeContainerProxyRequest, encodeMcpCallToolAnswer, fromHex } from "@diverge/codec";
import { onChannel, onScope, text, concat, json } from "./multiplexed-support.js";
import { agentContainer, answeredOnce, ask, begin, chunksUntil, connect, dequeue, enqueue, fate, framesOn, nextChunk, stubProgram, userPartOf } from "./agents-support.js";

describe("agents::begin", () => {
  it("posts {arguments} to /register and answers Begun with the tools as the program wrote them", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    const begun = await begin(raw, { greeting: "Hello" });
    expect(begun.variant).toBe("Begun");
    const tools = (begun as { tools: { name: string; arguments: unknown }[] }).tools;
    expect(tools.map((tool) => tool.name)).toEqual(["greeter"]);
    expect(tools[0]!.arguments).toEqual({ greeting: "Hello" });
    expect(container.agent.registered).toEqual({ greeting: "Hello" });
    expect(container.proxy.multiplexed.connection!.begin.begun).toBe(true);
  });

  it("answers a refused register NotBegun with the program's words and the finish; the connection is not begun, a later begin may try again", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    const refused = await begin(raw, { misbehave: ["register-5xx"] });
    expect(refused.variant).toBe("NotBegun");
    expect((refused as { error: { kind: string; status: number } }).error).toMatchObject({ kind: "program", status: 500 });
    expect((await raw.next(onScope(1))).variant).toBe("ResponseFinish");
    expect(container.proxy.multiplexed.connection!.begin.begun).toBe(false);
    expect((await begin(raw, {}, 3)).variant).toBe("Begun");
  });

  it("refuses a register answer that is not {tools: [...]} (not JSON, tools not an array) with the spec's error value", async () => {
    for (const mode of ["register-not-json", "register-bad-tools"]) {
      const container = await agentContainer({ misbehave: [mode] });
      const raw = await connect(container);
      const refused = await begin(raw, {});
      expect(refused).toMatchObject({ variant: "NotBegun", error: { kind: "agent" } });
      expect(String((refused as { error: { error: string } }).error.error)).toMatch(/^the register answer did not parse: /);
      expect((await raw.next(onScope(1))).variant).toBe("ResponseFinish");
    }
  });

  it("one begin per connection, whichever family: a second agents::begin and a tools::begin get one NotBegun and the finish", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    expect((await begin(raw, {})).variant).toBe("Begun");
    expect(await begin(raw, {}, 2)).toEqual({ variant: "NotBegun", error: { kind: "begun", error: "this connection has begun" } });
    expect((await raw.next(onScope(2))).variant).toBe("ResponseFinish");
    raw.send({ variant: "Request", scope: 3, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: {} } }) });
    expect(decodeToolsBeginResponse((await raw.next(onScope(3)) as { payload: Uint8Array }).payload).variant).toBe("NotBegun");
    expect((await raw.next(onScope(3))).variant).toBe("ResponseFinish");
    expect(container.agent.calls.filter((call) => call === "POST /register")).toHaveLength(1);
  });

  it("a connection begun with tools::begin refuses agents::begin", async () => {
    // A tool program: its /register answers the tools array itself.
    const program = await stubProgram((_request, _body, response) => response.writeHead(200, { "content-type": "application/json" }).end("[]"));
    const container = await agentContainer({ proxy: { appPort: program.port } });
    const raw = await connect(container);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: {} } }) });
    expect(decodeToolsBeginResponse((await raw.next(onScope(1)) as { payload: Uint8Array }).payload).variant).toBe("Begun");
    expect(await begin(raw, {}, 2)).toEqual({ variant: "NotBegun", error: { kind: "begun", error: "this connection has begun" } });
  });

  it("answers every malformed begin with a bare finish and nothing else, and none of them counts", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    const unreadable = [fromHex("00"), concat(fromHex("00"), text("[]")), concat(fromHex("00"), json({ agent: {} })), concat(fromHex("00"), json({ arguments: null, image: { name: "a" } })), concat(fromHex("00"), text("{"))];
    unreadable.forEach((payload, i) => raw.send({ variant: "Request", scope: 10 + i, channel: 0, payload }));
    for (let i = 0; i < unreadable.length; i++) {
      expect((await raw.next(onScope(10 + i))).variant).toBe("ResponseFinish");
      expect(raw.frames.filter(onScope(10 + i)).map((f) => f.variant)).toEqual(["ResponseFinish"]);
    }
    expect(container.agent.calls).not.toContain("POST /register");
    expect((await begin(raw, {}, 1)).variant).toBe("Begun");
  });

  it("accepts an A4d begin with an image (informative only; nothing is stamped)", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: concat(fromHex("00"), json({ arguments: { name: "bot" }, image: { name: "acme/agent", digest: "sha256:ab" } })) });
    expect((await raw.next(onScope(1))).variant).toBe("Response");
    enqueue(raw, 0, "k1", "hello");
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    const first = await nextChunk(raw);
    expect(first).toEqual({ type: "user_text_content", key: "k1", text: "hello" });
    expect(first).not.toHaveProperty("_meta");
  });
});

describe("the provider channels of the agents scope", () => {
  it("answers malformed channel requests with a bare finish and nothing else", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    const bad = [new Uint8Array(), fromHex("06"), fromHex("09"), fromHex("03"), concat(fromHex("03"), json({ key: "k1" })), concat(fromHex("03"), json({ key: "k", content: [{ type: "video" }] })), concat(fromHex("04"), text("{}")), fromHex("02 000007"), fromHex("00 0001"), concat(fromHex("05"), text('{"API_KEY":1}'))];
    bad.forEach((payload, channel) => raw.send({ variant: "ChannelRequest", scope: 1, channel, payload }));
    for (let channel = 0; channel < bad.length; channel++) {
      expect((await raw.next(onChannel(1, channel))).variant).toBe("ChannelResponseFinish");
      expect(framesOn(raw, channel).map((f) => f.variant)).toEqual(["ChannelResponseFinish"]);
    }
    expect(container.agent.calls.filter((call) => call !== "POST /register")).toEqual([]);
  });

  it("answers Info (tag 1) with the image's DIVERGE.md, as tools::begin does", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    ask(raw, 7, { variant: "Info" });
    const answer = decodeInfoAnswer((await raw.next(onChannel(1, 7)) as { payload: Uint8Array }).payload);
    expect(answer.variant).toBe("Info");
    expect((answer as { info: { frontMatter: { title: string } } }).info.frontMatter.title).toBe("Example agent");
    expect((await raw.next(onChannel(1, 7))).variant).toBe("ChannelResponseFinish");
  });

  it("answers a channel opened before Begun with a bare finish", async () => {
    const container = await agentContainer({ misbehave: ["register-hang"] });
    const raw = await connect(container);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: concat(fromHex("00"), json({ arguments: {} })) });
    await container.agent.until((agent) => agent.hanging === 1);
    enqueue(raw, 0, "k1", "hello");
    expect((await raw.next(onChannel(1, 0))).variant).toBe("ChannelResponseFinish");
  });
});

describe("the run loop (agents.md §6)", () => {
  it("starts a loop on an enqueue while idle: POST /run with {messages}, the batch delivered, the event stream relayed as chunks in order", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, { name: "bot" });
    enqueue(raw, 0, "k1", "hello");
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    const chunks = await chunksUntil(raw, (chunk) => chunk.type === "usage");
    expect(chunks[0]).toEqual({ type: "user_text_content", key: "k1", text: "hello" });
    expect(chunks.filter((c) => c.type === "assistant_reasoning").map((c) => c.text).join("")).toBe('bot reads the message under "k1": 1 step.');
    expect(chunks.filter((c) => c.type === "assistant_text_content").map((c) => c.text).join("")).toBe("You said: hello");
    expect(container.agent.calls).toEqual(["POST /register", "POST /run"]);
    answeredOnce(raw, [0]);
  });

  it("takes every waiting message as one batch, in enqueue order, when the gate opens (and holds them until then)", async () => {
    const container = await agentContainer({ proxy: { secretsGate: true } });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "a", "one");
    enqueue(raw, 1, "b", "two");
    // A round trip on the scope after both: neither reached the program.
    ask(raw, 2, { variant: "Info" });
    await raw.next(onChannel(1, 2));
    await raw.next(onChannel(1, 2));
    expect(container.agent.calls).toEqual(["POST /register"]);
    expect(framesOn(raw, 0)).toEqual([]);
    ask(raw, 3, { variant: "Secrets", values: { API_KEY: "k-1" } });
    expect((await raw.next(onChannel(1, 3)) as { payload: Uint8Array }).payload[0]).toBe(0);
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    const parts = await chunksUntil(raw, userPartOf("b"));
    expect(parts.map((c) => c.key)).toEqual(["a", "b"]);
    expect(container.agent.calls).toEqual(["POST /register", "POST /secrets", "POST /run"]);
  });

  it("delivers a message enqueued mid-loop with POST /enqueue into the loop in flight, at the program's seam", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "second");
    await container.agent.whenHeld(1);
    expect(framesOn(raw, 1)).toEqual([]);
    container.agent.release();
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    await chunksUntil(raw, userPartOf("k2"));
    expect(container.agent.calls).toEqual(["POST /register", "POST /run", "POST /enqueue"]);
    expect(container.agent.runs).toBe(1);
    answeredOnce(raw, [0, 1]);
  });

  it("posts one /enqueue at a time: the next waits in the proxy's queue until the one in flight has its fate", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "pause:two\nsecond");
    await container.agent.whenHeld(1);
    enqueue(raw, 2, "k3", "third");
    // A round trip after the third: still only one /enqueue reached the program.
    ask(raw, 9, { variant: "Info" });
    await raw.next(onChannel(1, 9));
    expect(container.agent.calls.filter((call) => call === "POST /enqueue")).toHaveLength(1);
    expect(container.proxy.multiplexed.connection!.families.agentLoop!.status).toMatchObject({ phase: "active", queued: 1, inFlight: true });
    container.agent.release();
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    // The loop waits at k2's pause: k3 is posted now, the one in flight once k2's fate came.
    await container.agent.whenPaused("two");
    await container.agent.whenHeld(1);
    expect(container.agent.calls.filter((call) => call === "POST /enqueue")).toHaveLength(2);
    container.agent.release("two");
    expect(await fate(raw, 2)).toEqual({ variant: "Delivered" });
    expect(container.agent.runs).toBe(1);
  });

  it("a delivery the loop missed goes back to the front, halts the loop, and starts the next loop when this one ends", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nstop");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "second");
    await container.agent.whenHeld(1);
    container.agent.release();
    // The loop ends at `stop`; the held message answers missed; the proxy starts the next loop on it.
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    await chunksUntil(raw, userPartOf("k2"));
    expect(container.agent.runs).toBe(2);
    expect(container.agent.calls).toEqual(["POST /register", "POST /run", "POST /enqueue", "POST /run"]);
    answeredOnce(raw, [0, 1]);
  });

  it("refuses every message of a batch the program would not run (4xx), with its words, and the next enqueue starts a loop", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    container.agent.misbehave([]);
    enqueue(raw, 0, "k1", "refuse:no thanks");
    const refused = await fate(raw, 0);
    expect(refused).toEqual({ variant: "Refused", error: expect.objectContaining({ kind: "refused", error: "no thanks" }) });
    enqueue(raw, 1, "k2", "hello");
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
  });

  it("a delivery refused with a 4xx is refused, final, never offered again", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "refuse");
    expect((await fate(raw, 1)).variant).toBe("Refused");
    container.agent.release();
    await container.agent.whenIdle();
    enqueue(raw, 2, "k3", "after");
    expect(await fate(raw, 2)).toEqual({ variant: "Delivered" });
    expect(container.agent.calls).toEqual(["POST /register", "POST /run", "POST /enqueue", "POST /run"]);
  });

  it("dequeue withdraws queued messages (each answered [01]) and the one in flight the program still holds; other keys stay", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "x", "in flight");
    await container.agent.whenHeld(1);
    enqueue(raw, 2, "y", "queued");
    enqueue(raw, 3, "y", "queued too");
    enqueue(raw, 4, "z", "stays");
    // Queued under y: drained by the proxy (the program held nothing under y).
    expect(await dequeue(raw, 10, "y")).toEqual({ variant: "Withdrew" });
    expect(await fate(raw, 2)).toEqual({ variant: "Dequeued" });
    expect(await fate(raw, 3)).toEqual({ variant: "Dequeued" });
    // In flight under x: the program withdraws it and its /enqueue answers dequeued.
    expect(await dequeue(raw, 11, "x")).toEqual({ variant: "Withdrew" });
    expect(await fate(raw, 1)).toEqual({ variant: "Dequeued" });
    // Nothing waits under q.
    expect(await dequeue(raw, 12, "q")).toEqual({ variant: "Nothing" });
    container.agent.release();
    expect(await fate(raw, 4)).toEqual({ variant: "Delivered" });
    await chunksUntil(raw, userPartOf("z"));
    expect(container.agent.calls.filter((call) => call === "POST /dequeue")).toHaveLength(3);
    answeredOnce(raw, [0, 1, 2, 3, 4, 10, 11, 12]);
  });

  it("dequeue while no loop runs answers from the proxy's queue alone", async () => {
    const container = await agentContainer({ proxy: { secretsGate: true } });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "held by the gate");
    expect(await dequeue(raw, 1, "k1")).toEqual({ variant: "Withdrew" });
    expect(await fate(raw, 0)).toEqual({ variant: "Dequeued" });
    expect(await dequeue(raw, 2, "k1")).toEqual({ variant: "Nothing" });
    expect(container.agent.calls).toEqual(["POST /register"]);
  });

  it("every fate reaches its enqueue channel exactly once: ten messages, a dequeue of one key mid-loop, loops until the queue is empty", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "first", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    const keys = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? "even" : "odd"));
    keys.forEach((key, i) => enqueue(raw, 1 + i, key, `message ${i}`));
    await container.agent.whenHeld(1);
    expect(await dequeue(raw, 20, "even")).toEqual({ variant: "Withdrew" });
    container.agent.release();
    const fates = await Promise.all(keys.map((_, i) => fate(raw, 1 + i)));
    expect(fates.map((f) => f.variant)).toEqual(keys.map((key) => (key === "even" ? "Dequeued" : "Delivered")));
    answeredOnce(raw, [0, ...keys.map((_, i) => 1 + i), 20]);
    // Every delivered message landed once (where it landed depends on whether its loop was still running).
    let odd = 0;
    const landed = await chunksUntil(raw, (chunk) => chunk.type === "user_text_content" && chunk.key === "odd" && ++odd === 5);
    const texts = landed.filter((c) => c.type === "user_text_content").map((c) => c.text as string);
    expect(texts[0]).toBe("pause\nfirst");
    expect(texts.slice(1).sort()).toEqual(["message 1", "message 3", "message 5", "message 7", "message 9"]);
  });

  it("a loop's end starts the next on whatever waits; loops follow one another", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    for (let i = 0; i < 3; i++) {
      enqueue(raw, i, `k${i}`, `message ${i}`);
      expect(await fate(raw, i)).toEqual({ variant: "Delivered" });
      await chunksUntil(raw, (chunk) => chunk.type === "usage");
      await container.agent.whenIdle();
    }
    expect(container.agent.runs).toBe(3);
  });

  it("ending the connection mid-loop aborts the program's /run and its held /enqueue; nothing waits", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "second");
    await container.agent.whenHeld(1);
    expect(container.agent.running).toBe(true);
    raw.socket.terminate();
    // The program sees both callers leave: the loop ends and the held message is forgotten.
    await container.agent.until((agent) => !agent.running && agent.held.length === 0);
    const loop = container.proxy.multiplexed.connection!.families.agentLoop!;
    expect(loop.status.ended).toBe(true);
  });

  it("ending the connection while /register hangs aborts it", async () => {
    const container = await agentContainer({ misbehave: ["register-hang"] });
    const raw = await connect(container);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: concat(fromHex("00"), json({ arguments: {} })) });
    await container.agent.until((agent) => agent.hanging === 1);
    raw.socket.terminate();
    await container.agent.until((agent) => agent.hanging === 0);
  });

  it("ending the connection while /run hangs aborts it, and the enqueue is never answered", async () => {
    const container = await agentContainer({ misbehave: ["run-hang"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    await container.agent.until((agent) => agent.hanging === 1);
    raw.socket.terminate();
    await container.agent.until((agent) => agent.hanging === 0);
  });
});

describe("the agent's outward asks (proxy-opened channels)", () => {
  it("a tool call of the agent through the program's /mcp goes on the agents scope as proxy-opened tag 9, and its answer comes back as the tool response", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", 'tool:greet {"name":"Ada"}');
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    const asked = await raw.next((frame) => frame.variant === "ChannelRequest" && frame.scope === 1 && (frame as { payload: Uint8Array }).payload[0] === 9, 20_000);
    const request = decodeAgentsBeginServerChannelRequest((asked as { payload: Uint8Array }).payload);
    expect(request).toEqual({ variant: "McpCallTool", params: expect.objectContaining({ name: "greet", arguments: { name: "Ada" } }) });
    raw.send({ variant: "ChannelResponse", scope: 1, channel: asked.channel, payload: encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: "Hello, Ada" }] } as never }) });
    raw.send({ variant: "ChannelResponseFinish", scope: 1, channel: asked.channel });
    const chunks = await chunksUntil(raw, (chunk) => chunk.type === "tool_response");
    expect(chunks.at(-1)).toMatchObject({ type: "tool_response", content: [{ type: "text", text: "Hello, Ada" }] });
    // Nothing went on /requests: the scope carried it.
    expect(container.proxy.paths.board.requestsOpen).toBeFalsy();
  });
});
