// /agent/* on the paths transport (agents.md §9 with its corrections): straight relays to the program,
// over real sockets, against raw programs of the test's own (this generation's bodies) and the example
// agent. Text messages are ignored; an ask that does not decode gets a close with no message; the
// provider leaving abandons the call.
import { describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { decodeAgentDequeueAnswer, decodeAgentEnqueueAnswer, decodeAgentRegisterAnswer, decodeAgentSchemaAnswer, decodeAgenticLoopAnswer } from "@diverge/codec";
import { startProxy, type RunningProxy } from "../src/index.js";
import { agentContainer, later, stubProgram } from "./agents-support.js";

interface Opened {
  readonly socket: WebSocket;
  readonly messages: Uint8Array[];
  /** The close code and every message, once the proxy has closed the path. */
  readonly closed: Promise<{ code: number; messages: Uint8Array[] }>;
}

async function open(port: number, path: string): Promise<Opened> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`);
  const messages: Uint8Array[] = [];
  socket.on("message", (data: Buffer) => messages.push(new Uint8Array(data)));
  const closed = new Promise<{ code: number; messages: Uint8Array[] }>((resolve) => socket.on("close", (code) => resolve({ code, messages })));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  later(async () => socket.terminate());
  return { socket, messages, closed };
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

async function proxyFor(appPort: number): Promise<RunningProxy> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort, secretsGate: false });
  later(() => proxy.close());
  return proxy;
}

type Handler = Parameters<typeof stubProgram>[0];
const answer = (status: number, body: string, type = "application/json"): Handler => (_request, _body, response) => response.writeHead(status, { "content-type": type }).end(body);

describe("/agent/*", () => {
  it("/agent/register relays the body verbatim to POST /register; 2xx → [0] (the body ignored)", async () => {
    const program = await stubProgram(answer(200, '{"whatever":true}'));
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/register");
    const ask = '{"agent":{"model":"m"},  "extra":1}';
    path.socket.send(Buffer.from(ask));
    const { code, messages } = await path.closed;
    expect(code).toBe(1000);
    expect(messages.map((m) => decodeAgentRegisterAnswer(m))).toEqual([{ variant: "Registered" }]);
    expect(program.calls).toEqual(["POST /register"]);
    expect(program.bodies).toEqual([ask]);
  });

  it("/agent/register: a non-2xx is [1] with the program's JSON verbatim, or its text wrapped with kind agent", async () => {
    const program = await stubProgram((request, _body, response) => {
      if (program.calls.length === 1) response.writeHead(409, { "content-type": "application/json" }).end('{"kind":"registered"}');
      else response.writeHead(500).end("boom");
    });
    const proxy = await proxyFor(program.port);
    for (const expected of [{ kind: "registered" }, { kind: "agent", status: 500, error: "boom" }]) {
      const path = await open(proxy.port, "/agent/register");
      path.socket.send(json({ agent: null }));
      const { messages } = await path.closed;
      expect(messages.map((m) => decodeAgentRegisterAnswer(m))).toEqual([{ variant: "Error", error: expected }]);
    }
  });

  it("an unreachable program is [1] {kind: agent, error}", async () => {
    const program = await stubProgram(answer(200, "{}"));
    const port = program.port;
    const proxy = await proxyFor(port);
    // A port nobody listens on.
    (proxy.options as { appPort: number }).appPort = 1;
    const path = await open(proxy.port, "/agent/register");
    path.socket.send(json({ agent: null }));
    const { messages } = await path.closed;
    const decoded = decodeAgentRegisterAnswer(messages[0]!);
    expect(decoded).toMatchObject({ variant: "Error", error: { kind: "agent" } });
  });

  it("ignores text messages and waits for the first binary one; an ask that does not decode closes with no message", async () => {
    const program = await stubProgram(answer(200, "{}"));
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/register");
    path.socket.send("a text message is ignored");
    path.socket.send(json({ agent: 1 }));
    expect((await path.closed).messages.map((m) => decodeAgentRegisterAnswer(m))).toEqual([{ variant: "Registered" }]);
    for (const [where, bad] of [["/agent/register", "1"], ["/agent/run", "nope"], ["/agent/enqueue", ""]] as const) {
      const path = await open(proxy.port, where);
      path.socket.send(Buffer.from(bad));
      const { code, messages } = await path.closed;
      expect(messages).toEqual([]);
      expect(code).not.toBe(1006);
    }
    expect(program.calls).toEqual(["POST /register"]);
  });

  it("/agent/run relays each event as [0][chunk] in order and closes when the stream ends", async () => {
    const events = [{ type: "user", content: [{ type: "text", text: "hi" }] }, { type: "assistant_text_content", text: "Hi" }];
    const program = await stubProgram((_request, _body, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(`data: ${JSON.stringify(events[0])}\n\n: a comment\nevent: ignored\n`);
      response.end(`data: ${JSON.stringify(events[1])}\r\n\r\n`);
    });
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/run");
    path.socket.send(json({ prompt: "hi" }));
    const { code, messages } = await path.closed;
    expect(code).toBe(1000);
    expect(messages.map((m) => decodeAgenticLoopAnswer(m))).toEqual(events.map((chunk) => ({ variant: "Chunk", chunk })));
    expect(program.bodies).toEqual(['{"prompt":"hi"}']);
  });

  it("/agent/run: a stream that dies after chunks ends with [1] {kind: loop, error: the loop ended without finishing}", async () => {
    const program = await stubProgram((_request, _body, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write('data: {"type":"assistant_text_content","text":"Hi"}\n\n', () => response.socket!.destroy());
    });
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/run");
    path.socket.send(json({ prompt: "hi" }));
    const { messages } = await path.closed;
    expect(messages.map((m) => decodeAgenticLoopAnswer(m))).toEqual([
      { variant: "Chunk", chunk: { type: "assistant_text_content", text: "Hi" } },
      { variant: "Error", error: { kind: "loop", error: "the loop ended without finishing" } },
    ]);
  });

  it("/agent/run: a non-2xx first is [1] with the program's words; garbage events become notifications", async () => {
    const refusing = await stubProgram(answer(409, '{"kind":"running"}'));
    const proxy = await proxyFor(refusing.port);
    const path = await open(proxy.port, "/agent/run");
    path.socket.send(json({ prompt: "hi" }));
    expect((await path.closed).messages.map((m) => decodeAgenticLoopAnswer(m))).toEqual([{ variant: "Error", error: { kind: "running" } }]);
    const garbage = await stubProgram((_request, _body, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end("data: not json\n\ndata: [1]\n\n");
    });
    const other = await proxyFor(garbage.port);
    const second = await open(other.port, "/agent/run");
    second.socket.send(json({ prompt: "hi" }));
    const decoded = (await second.closed).messages.map((m) => decodeAgenticLoopAnswer(m));
    expect(decoded).toHaveLength(2);
    for (const message of decoded) expect(message).toMatchObject({ variant: "Chunk", chunk: { type: "notification", is_fatal: false, message: { kind: "agent" } } });
  });

  it("/agent/schema: GET /schema, the 2xx body unparsed after [0]; else [1]", async () => {
    const program = await stubProgram(answer(200, "not even json"));
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/schema");
    const { messages } = await path.closed;
    expect(messages).toHaveLength(1);
    expect(messages[0]![0]).toBe(0);
    expect(Buffer.from(messages[0]!.subarray(1)).toString()).toBe("not even json");
    expect(program.calls).toEqual(["GET /schema"]);
    // The example agent's schema.
    const container = await agentContainer();
    const fromAgent = await open(container.proxy.port, "/agent/schema");
    const schema = decodeAgentSchemaAnswer((await fromAgent.closed).messages[0]!);
    expect(schema).toMatchObject({ variant: "Schema", schema: { type: "object" } });
    const failing = await stubProgram(answer(500, "no schema", "text/plain"));
    const third = await open((await proxyFor(failing.port)).port, "/agent/schema");
    expect(decodeAgentSchemaAnswer((await third.closed).messages[0]!)).toEqual({ variant: "Error", error: { kind: "agent", status: 500, error: "no schema" } });
  });

  it("/agent/enqueue: held until the fate; delivered/dequeued/missed → [0]/[1]/[2]; unparseable → [3] {kind: agent}; non-2xx → [3]", async () => {
    const fates = ['{"type":"delivered"}', '{"type":"dequeued"}', '{"type":"missed"}', '{"type":"lost"}'];
    const program = await stubProgram(answer(200, "{}"));
    const proxy = await proxyFor(program.port);
    const expected = [{ variant: "Delivered" }, { variant: "Dequeued" }, { variant: "Missed" }, { variant: "Error", error: { kind: "agent", error: "the fate did not parse: unknown variant: `type` names no ProgramEnqueueFate" } }];
    for (let i = 0; i < fates.length; i++) {
      const body = fates[i]!;
      const held = await stubProgram((_request, _body, response) => response.writeHead(200, { "content-type": "application/json" }).end(body));
      (proxy.options as { appPort: number }).appPort = held.port;
      const path = await open(proxy.port, "/agent/enqueue");
      path.socket.send(json({ prompt: `p${i}` }));
      expect((await path.closed).messages.map((m) => decodeAgentEnqueueAnswer(m))).toEqual([expected[i]]);
      expect(held.bodies).toEqual([`{"prompt":"p${i}"}`]);
    }
    const refusing = await stubProgram(answer(422, '{"kind":"refused"}'));
    (proxy.options as { appPort: number }).appPort = refusing.port;
    const path = await open(proxy.port, "/agent/enqueue");
    path.socket.send(json({ prompt: "p" }));
    expect((await path.closed).messages.map((m) => decodeAgentEnqueueAnswer(m))).toEqual([{ variant: "Error", error: { kind: "refused" } }]);
  });

  it("/agent/enqueue: the provider leaving drops the held call to the program", async () => {
    let gone!: () => void;
    const left = new Promise<void>((resolve) => (gone = resolve));
    let arrived!: (response: import("node:http").ServerResponse) => void;
    const held = new Promise<import("node:http").ServerResponse>((resolve) => (arrived = resolve));
    const program = await stubProgram((_request, _body, response) => {
      response.on("close", gone);
      arrived(response);
    });
    const proxy = await proxyFor(program.port);
    const path = await open(proxy.port, "/agent/enqueue");
    path.socket.send(json({ prompt: "p" }));
    const response = await held;
    path.socket.terminate();
    // The proxy abandons the call: the program sees its caller leave, never having answered.
    await left;
    expect(response.writableEnded).toBe(false);
  });

  it("/agent/dequeue: POST /dequeue with {}; dequeued → [0], empty → [1], unparseable → [2] {kind: agent}", async () => {
    const outcomes = ['{"type":"dequeued"}', '{"type":"empty"}', "{}"];
    const expected = [{ variant: "Withdrew" }, { variant: "Nothing" }, { variant: "Error", error: { kind: "agent", error: "the outcome did not parse: missing field `type`" } }];
    for (let i = 0; i < outcomes.length; i++) {
      const body = outcomes[i]!;
      const program = await stubProgram(answer(200, body));
      const proxy = await proxyFor(program.port);
      const path = await open(proxy.port, "/agent/dequeue");
      expect((await path.closed).messages.map((m) => decodeAgentDequeueAnswer(m))).toEqual([expected[i]]);
      expect(program.calls).toEqual(["POST /dequeue"]);
      expect(program.bodies).toEqual(["{}"]);
    }
  });
});
