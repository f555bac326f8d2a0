// The generic channel engine under the generated ProviderAsks (multiplexed/channel-engine.ts), through a
// real connection against a raw stand-in proxy on loopback: every ChannelOutcome of a one-message
// channel (tag 3, list tools; tag 1, info) and of a stream channel (tag 7, notifications), and how the
// connection's own calls map each outcome to their results and ContainerErrors.
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import {
  decodeClientFrame,
  decodeMcpListToolsAnswer,
  decodeMcpNotificationsAnswer,
  decodeToolsBeginChannelRequest,
  encodeInfoAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeServerFrame,
  encodeToolsBeginResponse,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { ContainerError, openContainer, type MultiplexedConnection } from "../src/index.js";

/** What the stand-in does with a channel the provider opens: send these payloads, then finish, end abruptly, or keep it open. */
type Script = (request: ToolsBeginChannelRequest) => { readonly send: readonly Uint8Array[]; readonly then: "finish" | "drop" | "hold" };

const closers: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A raw proxy stand-in: answers the begin with Begun (keeping the scope open), and each provider channel by `script`. */
async function standIn(script: Script): Promise<{ connection: MultiplexedConnection; requests: ToolsBeginChannelRequest[] }> {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((resolve) => server.once("listening", resolve));
  const requests: ToolsBeginChannelRequest[] = [];
  server.on("connection", (socket: WebSocket) => {
    socket.on("error", () => {});
    socket.on("message", (data: Buffer) => {
      const frame = decodeClientFrame(new Uint8Array(data));
      if (frame.variant === "Request") {
        socket.send(encodeServerFrame({ variant: "Response", scope: frame.scope, channel: 0, payload: encodeToolsBeginResponse({ variant: "Begun", tools: [] }) }));
        return;
      }
      if (frame.variant !== "ChannelRequest") return;
      const request = decodeToolsBeginChannelRequest(frame.payload);
      requests.push(request);
      const plan = script(request);
      for (const payload of plan.send) socket.send(encodeServerFrame({ variant: "ChannelResponse", scope: frame.scope, channel: frame.channel, payload }));
      if (plan.then === "finish") socket.send(encodeServerFrame({ variant: "ChannelResponseFinish", scope: frame.scope, channel: frame.channel }));
      else if (plan.then === "drop") setTimeout(() => socket.terminate(), 20);
    });
  });
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate();
        server.close(() => resolve());
      }),
  );
  const connection = await openContainer(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  closers.push(() => connection.close());
  await connection.beginTools({ arguments: null });
  return { connection, requests };
}

/** Bytes no answer frame reads: an unknown variant tag. */
const GARBAGE = new Uint8Array([0xfe, 1, 2]);

function decodeFailure(decode: (bytes: Uint8Array) => unknown): string {
  try {
    decode(GARBAGE);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("expected the decoder to refuse the bytes");
}

async function containerError(promise: Promise<unknown>): Promise<ContainerError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ContainerError);
    return error as ContainerError;
  }
  throw new Error("expected a rejection");
}

const tools = { tools: [{ name: "greet", inputSchema: { type: "object" as const } }] };
const notification = (n: number) => ({ method: "notifications/message", params: { level: "info", data: `n${n}` } });

describe("the channel engine, one-message channel", () => {
  it("answered: the first message, decoded with the channel's decoder, once the channel finishes", async () => {
    const answer = encodeMcpListToolsAnswer({ variant: "Result", result: tools });
    const { connection, requests } = await standIn(() => ({ send: [answer, encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [] } })], then: "finish" }));
    expect(await connection.asks.mcpListTools({ params: { cursor: "c1" } })).toEqual({ type: "answered", answer: { variant: "Result", result: tools } });
    // The request went out as the generated binding wrote it.
    expect(requests).toEqual([{ variant: "McpListTools", params: { cursor: "c1" } }]);
    expect(await connection.mcp.listTools()).toEqual(tools);
  });

  it("answered with the MCP error: the connection's call rejects with Mcp and the error intact", async () => {
    const error = { code: -32602, message: "bad cursor", data: { at: 1 } };
    const { connection } = await standIn(() => ({ send: [encodeMcpListToolsAnswer({ variant: "Error", error })], then: "finish" }));
    expect((await containerError(connection.mcp.listTools())).detail).toEqual({ variant: "Mcp", what: "tools/list", error });
  });

  it("bareFinish: a finish with nothing before it carries the channel's meaning; the call is NotServed", async () => {
    const { connection } = await standIn(() => ({ send: [], then: "finish" }));
    expect(await connection.asks.mcpListTools({ params: null })).toEqual({ type: "bareFinish", meaning: "notServed" });
    expect(await connection.asks.info({})).toEqual({ type: "bareFinish", meaning: "notServed" });
    expect((await containerError(connection.mcp.listTools())).detail).toEqual({ variant: "NotServed", what: "tools/list" });
    expect((await containerError(connection.info())).detail).toEqual({ variant: "NotServed", what: "info" });
  });

  it("unreadable: the decoder's exact error; the call is Unreadable with it", async () => {
    const { connection } = await standIn(() => ({ send: [GARBAGE], then: "finish" }));
    const reason = decodeFailure(decodeMcpListToolsAnswer);
    expect(await connection.asks.mcpListTools({ params: null })).toEqual({ type: "unreadable", reason });
    expect((await containerError(connection.mcp.listTools())).detail).toEqual({ variant: "Unreadable", what: "tools/list", reason });
  });

  it("lost: the connection ends before the finish, even after the answer's message", async () => {
    const { connection } = await standIn(() => ({ send: [encodeMcpListToolsAnswer({ variant: "Result", result: tools })], then: "drop" }));
    const [outcome, error] = await Promise.all([connection.asks.mcpListTools({ params: null }), containerError(connection.mcp.listTools())]);
    expect(outcome).toEqual({ type: "lost" });
    expect(error.detail).toEqual({ variant: "Lost", what: "tools/list" });
  });

  it("info's None answer is undefined, its Info answer the parsed file", async () => {
    let none = true;
    const { connection } = await standIn(() => {
      const payload = none ? encodeInfoAnswer({ variant: "None" }) : encodeInfoAnswer({ variant: "Info", info: { frontMatter: { title: "T" }, body: "# T" } });
      none = false;
      return { send: [payload], then: "finish" };
    });
    expect(await connection.info()).toBeUndefined();
    expect(await connection.info()).toEqual({ frontMatter: { title: "T" }, rawFrontMatter: { title: "T" }, body: "# T" });
  });

  it("the caller's timeout still bounds a channel the stand-in never finishes", async () => {
    const { connection } = await standIn(() => ({ send: [], then: "hold" }));
    expect((await containerError(connection.mcp.listTools(undefined, { timeoutMs: 50 }))).detail).toMatchObject({ variant: "TimedOut", what: "tools/list", timeoutMs: 50 });
  });
});

describe("the channel engine, stream channel", () => {
  const message = (n: number) => encodeMcpNotificationsAnswer({ variant: "Notification", notification: notification(n) });

  it("answered then done: every message in order, ended done after the finish", async () => {
    const { connection, requests } = await standIn(() => ({ send: [message(1), message(2), message(3)], then: "finish" }));
    const stream = connection.asks.mcpNotifications({});
    const seen: unknown[] = [];
    for await (const answer of stream) seen.push(answer);
    expect(seen).toEqual([1, 2, 3].map((n) => ({ variant: "Notification", notification: notification(n) })));
    expect(await stream.ended).toEqual({ type: "done" });
    expect(requests).toEqual([{ variant: "McpNotifications" }]);
  });

  it("the variant sent last ends the stream: done at once, what follows disregarded", async () => {
    const error = { code: -32000, message: "gone" };
    const { connection } = await standIn(() => ({ send: [message(1), encodeMcpNotificationsAnswer({ variant: "Error", error }), message(2)], then: "hold" }));
    const stream = connection.asks.mcpNotifications({});
    const seen: unknown[] = [];
    for await (const answer of stream) seen.push(answer);
    expect(seen).toEqual([{ variant: "Notification", notification: notification(1) }, { variant: "Error", error }]);
    expect(await stream.ended).toEqual({ type: "done" });
    // The connection's iterator throws Mcp with the error after the notification before it.
    const loop = connection.mcp.notifications();
    const delivered: unknown[] = [];
    const failure = await containerError((async () => {
      for await (const each of loop) delivered.push(each);
    })());
    expect(delivered).toEqual([notification(1)]);
    expect(failure.detail).toEqual({ variant: "Mcp", what: "notifications", error });
  });

  it("bareFinish: a finish with no message; the connection's loop throws NotServed", async () => {
    const { connection } = await standIn(() => ({ send: [], then: "finish" }));
    const stream = connection.asks.mcpNotifications({});
    for await (const _ of stream) throw new Error("no message was sent");
    expect(await stream.ended).toEqual({ type: "bareFinish", meaning: "notServed" });
    const failure = await containerError((async () => {
      for await (const _ of connection.mcp.notifications());
    })());
    expect(failure.detail).toEqual({ variant: "NotServed", what: "notifications" });
  });

  it("unreadable: the messages before it, then ended with the decoder's exact error", async () => {
    const { connection } = await standIn(() => ({ send: [message(1), GARBAGE, message(2)], then: "finish" }));
    const reason = decodeFailure(decodeMcpNotificationsAnswer);
    const stream = connection.asks.mcpNotifications({});
    const seen: unknown[] = [];
    for await (const answer of stream) seen.push(answer);
    expect(seen).toEqual([{ variant: "Notification", notification: notification(1) }]);
    expect(await stream.ended).toEqual({ type: "unreadable", reason });
    const delivered: unknown[] = [];
    const failure = await containerError((async () => {
      for await (const each of connection.mcp.notifications()) delivered.push(each);
    })());
    expect(delivered).toEqual([notification(1)]);
    expect(failure.detail).toEqual({ variant: "Unreadable", what: "notifications", reason });
  });

  it("lost: the messages before it, then ended lost when the connection drops; the loop throws Lost", async () => {
    const { connection } = await standIn(() => ({ send: [message(1)], then: "drop" }));
    const stream = connection.asks.mcpNotifications({});
    const delivered: unknown[] = [];
    const loop = (async () => {
      for await (const each of connection.mcp.notifications()) delivered.push(each);
    })();
    const seen: unknown[] = [];
    for await (const answer of stream) seen.push(answer);
    expect(seen).toEqual([{ variant: "Notification", notification: notification(1) }]);
    expect(await stream.ended).toEqual({ type: "lost" });
    expect((await containerError(loop)).detail).toEqual({ variant: "Lost", what: "notifications" });
    expect(delivered).toEqual([notification(1)]);
  });

  it("listen delivers each event in the turn its frame arrives, before an iterator would", async () => {
    const { connection } = await standIn(() => ({ send: [message(1), message(2)], then: "finish" }));
    const events: string[] = [];
    const stream = connection.asks.mcpNotifications({});
    stream.listen({
      answer: (answer) => events.push(`answer ${JSON.stringify((answer as { notification: { params: { data: string } } }).notification.params.data)}`),
      unreadable: (reason) => events.push(`unreadable ${reason}`),
      end: (ending) => events.push(`end ${ending.type}`),
    });
    expect(await stream.ended).toEqual({ type: "done" });
    expect(events).toEqual(['answer "n1"', 'answer "n2"', "end done"]);
  });
});
