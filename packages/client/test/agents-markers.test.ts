// The provider's reader of the agents::begin scope on bytes a proxy of another generation could send:
// A5's loop markers ([03] Active, [04] Inactive) are read and skipped (never a chunk), an Inactive
// settles the loop at once, and a chunk that is none of the fourteen is an event, not the end. The
// peer here is a raw Frames-layer server writing the spec's bytes (agents.md §10 A4, A8, A17), not a proxy.
import { WebSocketServer, type WebSocket } from "ws";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { FrameSocket, type Responder, type WebSocketLike } from "@diverge/multiplexer";
import { encodeAgentsBeginResponse } from "@diverge/codec";
import { openContainer, type AgentEvent } from "../src/index.js";

const closers: (() => unknown)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

it("skips A5's loop markers, settles on Inactive, and reports a chunk that is none of the fourteen", async () => {
  let scopeResponder: Responder | undefined;
  const begun = new Promise<void>((resolve) => {
    const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
    closers.push(() => server.close());
    server.on("connection", (socket: WebSocket) => {
      new FrameSocket(socket as unknown as WebSocketLike, {
        role: "server",
        events: {
          scope: (responder, payload) => {
            expect(payload[0]).toBe(0);
            expect(JSON.parse(Buffer.from(payload.subarray(1)).toString())).toEqual({ arguments: { a: 1 } });
            scopeResponder = responder;
            responder.respond(encodeAgentsBeginResponse({ variant: "Begun", tools: [] }));
            resolve();
          },
        },
      });
    });
    closers.push(() => server.clients.forEach((client) => client.terminate()));
    (globalThis as { port?: number }).port = undefined;
    server.on("listening", () => ((globalThis as { port?: number }).port = (server.address() as AddressInfo).port));
  });
  while ((globalThis as { port?: number }).port === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
  const connection = await openContainer(`ws://127.0.0.1:${(globalThis as { port?: number }).port}/`);
  closers.push(() => connection.close());
  const agent = await connection.beginAgent({ arguments: { a: 1 } });
  await begun;
  const events: AgentEvent[] = [];
  agent.onEvent((event) => events.push(event));
  const chunks: string[] = [];
  const reading = (async () => {
    for await (const chunk of agent.chunks()) chunks.push(chunk.type);
  })();
  scopeResponder!.respond(Uint8Array.of(3));
  scopeResponder!.respond(encodeAgentsBeginResponse({ variant: "Chunk", chunk: { type: "user_text_content", key: "k1", text: "hello" } }));
  scopeResponder!.respond(Uint8Array.from([2, ...Buffer.from('{"type":"no_such_chunk"}')]));
  scopeResponder!.respond(encodeAgentsBeginResponse({ variant: "Chunk", chunk: { type: "assistant_text_content", text: "Hi" } }));
  while (!chunks.includes("assistant_text_content")) await new Promise((resolve) => setTimeout(resolve, 5));
  // While Active, the loop is not settled however quiet it is.
  const settledEarly = await Promise.race([agent.settled({ idleMs: 50 }).then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 300))]);
  expect(settledEarly).toBe(false);
  scopeResponder!.respond(Uint8Array.of(4));
  await agent.settled({ idleMs: 60_000 });
  scopeResponder!.finish();
  await reading;
  expect(chunks).toEqual(["user_text_content", "assistant_text_content"]);
  expect(events.map((event) => event.type)).toEqual(["loopMarker", "unreadableChunk", "loopMarker"]);
});
