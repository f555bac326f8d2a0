// An agent container for the agents tests: the example agent program and a proxy in front of it, and
// the provider's side as raw frames over a real WebSocket (test/multiplexed-support.ts) with the
// generated codec.
import {
  decodeAgentsBeginResponse,
  decodeDequeueAnswer,
  decodeEnqueueAnswer,
  encodeAgentsBeginChannelRequest,
  encodeAgentsBeginRequest,
  type AgentsBeginChannelRequest,
  type AgentsBeginResponse,
  type DequeueAnswer,
  type EnqueueAnswer,
  type ServerFrame,
} from "@diverge/codec";
import { exampleAgentRoot, startExampleAgent, type ExampleAgent } from "@diverge/example-agent";
import { afterEach, expect } from "vitest";
import { startProxy, type ProxyOptions, type RunningProxy } from "../src/index.js";
import { onChannel, onScope, rawConnect, type RawConnection } from "./multiplexed-support.js";

export interface AgentContainer {
  readonly agent: ExampleAgent;
  readonly proxy: RunningProxy;
  readonly log: string[];
  /** Resolves once the proxy has logged a line that matches (now or later). */
  logged(pattern: RegExp): Promise<string>;
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/** Registers work to undo after the test. */
export const later = (cleanup: () => Promise<unknown>) => cleanups.push(cleanup);

export async function agentContainer(options: { misbehave?: string[]; proxy?: ProxyOptions } = {}): Promise<AgentContainer> {
  let proxy: RunningProxy | undefined;
  const agent = await startExampleAgent({ port: 0, mcpUrl: () => `http://127.0.0.1:${proxy!.programPort}/mcp`, misbehave: options.misbehave ?? [] });
  later(() => agent.close());
  const log: string[] = [];
  const waiting: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const onLine = (line: string) => {
    log.push(line);
    for (const waiter of waiting.splice(0)) {
      if (waiter.pattern.test(line)) waiter.resolve(line);
      else waiting.push(waiter);
    }
  };
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: agent.port, root: exampleAgentRoot, secretsGate: false, log: onLine, ...options.proxy });
  later(() => proxy!.close());
  const logged = (pattern: RegExp) => {
    const found = log.find((line) => pattern.test(line));
    return found !== undefined ? Promise.resolve(found) : new Promise<string>((resolve) => waiting.push({ pattern, resolve }));
  };
  return { agent, proxy, log, logged };
}

export async function connect(container: AgentContainer): Promise<RawConnection> {
  const raw = await rawConnect(container.proxy.port);
  later(async () => raw.socket.terminate());
  return raw;
}

const payloadOf = (frame: ServerFrame): Uint8Array => (frame as { payload: Uint8Array }).payload;

/** Sends agents::begin on `scope` and reads its first answer. */
export async function begin(raw: RawConnection, args: unknown = {}, scope = 1): Promise<AgentsBeginResponse> {
  raw.send({ variant: "Request", scope, channel: 0, payload: encodeAgentsBeginRequest({ variant: "Begin", begin: { arguments: args } }) });
  const first = await raw.next(onScope(scope));
  if (first.variant === "ResponseFinish") throw new Error("a bare finish answered the begin");
  return decodeAgentsBeginResponse(payloadOf(first));
}

export function ask(raw: RawConnection, channel: number, request: AgentsBeginChannelRequest, scope = 1): void {
  raw.send({ variant: "ChannelRequest", scope, channel, payload: encodeAgentsBeginChannelRequest(request) });
}

/** A text message under `key` (each line a step of the example agent's script). */
export function enqueue(raw: RawConnection, channel: number, key: string, text: string): void {
  ask(raw, channel, { variant: "Enqueue", message: { key, content: [{ type: "text", text }] } });
}

/** The one answer on an enqueue channel, and its finish. */
export async function fate(raw: RawConnection, channel: number, scope = 1): Promise<EnqueueAnswer> {
  const answer = await raw.next(onChannel(scope, channel), 20_000);
  expect(answer.variant).toBe("ChannelResponse");
  expect((await raw.next(onChannel(scope, channel), 20_000)).variant).toBe("ChannelResponseFinish");
  return decodeEnqueueAnswer(payloadOf(answer));
}

export async function dequeue(raw: RawConnection, channel: number, key: string, scope = 1): Promise<DequeueAnswer> {
  ask(raw, channel, { variant: "Dequeue", request: { key } }, scope);
  const answer = await raw.next(onChannel(scope, channel), 20_000);
  expect(answer.variant).toBe("ChannelResponse");
  expect((await raw.next(onChannel(scope, channel), 20_000)).variant).toBe("ChannelResponseFinish");
  return decodeDequeueAnswer(payloadOf(answer));
}

/** The next chunk on the begin scope, decoded by the provider's typed reader (it throws on a chunk that is none of the fourteen). */
export async function nextChunk(raw: RawConnection, scope = 1): Promise<Record<string, unknown>> {
  const frame = await raw.next(onScope(scope), 20_000);
  expect(frame.variant).toBe("Response");
  const response = decodeAgentsBeginResponse(payloadOf(frame));
  if (response.variant !== "Chunk") throw new Error(`expected a chunk, got ${response.variant}`);
  return response.chunk as unknown as Record<string, unknown>;
}

/** Chunks until one matches (inclusive), in order. */
export async function chunksUntil(raw: RawConnection, match: (chunk: Record<string, unknown>) => boolean, scope = 1): Promise<Record<string, unknown>[]> {
  const seen: Record<string, unknown>[] = [];
  for (;;) {
    const chunk = await nextChunk(raw, scope);
    seen.push(chunk);
    if (match(chunk)) return seen;
  }
}

export const userPartOf = (key: string) => (chunk: Record<string, unknown>) => chunk.type === "user_text_content" && chunk.key === key;

/** Every frame the proxy sent on a provider channel so far. */
export const framesOn = (raw: RawConnection, channel: number, scope = 1) => raw.frames.filter(onChannel(scope, channel));

/** Each channel got exactly one answer and one finish. */
export function answeredOnce(raw: RawConnection, channels: readonly number[]): void {
  for (const channel of channels) {
    expect(framesOn(raw, channel).map((frame) => frame.variant), `channel ${channel}`).toEqual(["ChannelResponse", "ChannelResponseFinish"]);
  }
}

/** A program of the test's own on loopback (a raw program that answers as `handle` says), closed after the test. */
export async function stubProgram(handle: (request: import("node:http").IncomingMessage, body: string, response: import("node:http").ServerResponse) => void): Promise<{ port: number; calls: string[]; bodies: string[] }> {
  const { createServer } = await import("node:http");
  const calls: string[] = [];
  const bodies: string[] = [];
  const sockets = new Set<import("node:net").Socket>();
  const server = createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on("data", (part: Buffer) => parts.push(part));
    request.on("end", () => {
      calls.push(`${request.method} ${request.url}`);
      const body = Buffer.concat(parts).toString("utf8");
      bodies.push(body);
      handle(request, body, response);
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  later(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return { port: (server.address() as import("node:net").AddressInfo).port, calls, bodies };
}
