import { describe, expect, it } from "vitest";
import { fromHex, toHex } from "@diverge/codec";
import { Multiplexer, MultiplexerError, type Disregard, type Responder } from "../src/index.js";

/** A multiplexer of one role whose output and events are recorded, fed raw frames as hex. */
function harness(role: "client" | "server") {
  const sent: string[] = [];
  const disregarded: Disregard[] = [];
  const scopes: { responder: Responder; payload: string }[] = [];
  const channels: { responder: Responder; payload: string }[] = [];
  const authorizations: string[] = [];
  const ended: number[] = [];
  const mux = new Multiplexer({
    role,
    send: (frame) => sent.push(toHex(frame)),
    events: {
      scope: (responder, payload) => scopes.push({ responder, payload: toHex(payload) }),
      channel: (responder, payload) => channels.push({ responder, payload: toHex(payload) }),
      authorization: (payload) => authorizations.push(toHex(payload)),
      disregarded: (what) => disregarded.push(what),
      scopeEnded: (scope) => ended.push(scope),
    },
  });
  const feed = (hex: string) => mux.receive(fromHex(hex.replace(/ /g, "")));
  return { mux, sent, disregarded, scopes, channels, authorizations, ended, feed };
}

function recorder() {
  const events: string[] = [];
  return {
    events,
    handlers: {
      response: (payload: Uint8Array) => events.push(`response ${toHex(payload)}`),
      finish: (served: boolean) => events.push(served ? "finish" : "bare finish"),
      lost: () => events.push("lost"),
    },
  };
}

describe("the server side", () => {
  it("opens a scope on a request and answers it with responses and one finish", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01 7b7d");
    expect(h.scopes).toHaveLength(1);
    expect(h.scopes[0]!.payload).toBe("017b7d");
    const scope = h.scopes[0]!.responder;
    expect(scope.scope).toBe(1);
    scope.respond(fromHex("005b5d"));
    scope.finish();
    scope.finish();
    scope.respond(fromHex("00"));
    expect(h.sent).toEqual(["020000000100000000005b5d", "030000000100000000"]);
    expect(h.ended).toEqual([1]);
  });

  it("disregards a request naming a scope that is open, and takes the number again once it finished", () => {
    const h = harness("server");
    h.feed("01 00000002 00000000 01");
    h.feed("01 00000002 00000000 02");
    expect(h.scopes).toHaveLength(1);
    expect(h.disregarded).toEqual([{ reason: "scope-open", scope: 2 }]);
    h.scopes[0]!.responder.finish();
    h.feed("01 00000002 00000000 03");
    expect(h.scopes.map((s) => s.payload)).toEqual(["01", "03"]);
  });

  it("disregards malformed frames without ending anything", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    for (const hex of ["", "04 00000001 000000", "02 00000001 00000000 00", "03 00000001 00000000", "07 00000001 00000000", "ff 00000000 00000000"]) h.feed(hex);
    expect(h.disregarded.map((d) => d.reason)).toEqual(Array(6).fill("malformed"));
    const messages = h.disregarded.map((d) => (d.reason === "malformed" ? d.error.message : ""));
    expect(messages).toEqual([
      "frame is shorter than its header",
      "frame is shorter than its header",
      "unknown frame type 2",
      "unknown frame type 3",
      "unknown frame type 7",
      "unknown frame type 255",
    ]);
    expect(h.mux.ended).toBe(false);
    h.feed("04 00000001 00000000 07");
    expect(h.channels).toHaveLength(1);
  });

  it("disregards a channel request naming no open scope", () => {
    const h = harness("server");
    h.feed("04 00000005 00000000 07");
    expect(h.channels).toHaveLength(0);
    expect(h.disregarded).toEqual([{ reason: "unknown-scope", scope: 5, type: "ChannelRequest" }]);
  });

  it("numbers channels per opener per scope: the same number in two scopes and of both parties coexist", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("01 00000002 00000000 01");
    h.feed("04 00000001 00000000 aa");
    h.feed("04 00000002 00000000 bb");
    const mine = recorder();
    const opened = h.mux.openChannel(1, fromHex("00 00000001".replace(/ /g, "")), mine.handlers);
    expect(opened.channel).toBe(0);
    expect(h.channels.map((c) => [c.responder.scope, c.responder.channel, c.payload])).toEqual([
      [1, 0, "aa"],
      [2, 0, "bb"],
    ]);
    // A type-5 from the client quotes the server's channel 0; the client's own channel 0 is unaffected.
    h.feed("05 00000001 00000000 4e");
    expect(mine.events).toEqual(["response 4e"]);
    h.channels[0]!.responder.respond(fromHex("01"));
    h.channels[1]!.responder.finish();
    expect(h.sent.slice(-2)).toEqual(["05000000010000000001", "060000000200000000"]);
  });

  it("disregards a channel request naming a channel the client has open, and takes the number again once finished", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("04 00000001 00000003 03 6e756c6c");
    h.feed("04 00000001 00000003 07");
    expect(h.channels).toHaveLength(1);
    expect(h.disregarded).toEqual([{ reason: "channel-open", scope: 1, channel: 3 }]);
    h.channels[0]!.responder.finish();
    h.feed("04 00000001 00000003 07");
    expect(h.channels.map((c) => c.payload)).toEqual(["036e756c6c", "07"]);
  });

  it("disregards channel responses and finishes naming no channel it opened", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("05 00000001 00000009 00");
    h.feed("06 00000001 00000009");
    h.feed("06 00000004 00000000");
    expect(h.disregarded).toEqual([
      { reason: "unknown-channel", scope: 1, channel: 9, type: "ChannelResponse" },
      { reason: "unknown-channel", scope: 1, channel: 9, type: "ChannelResponseFinish" },
      { reason: "unknown-scope", scope: 4, type: "ChannelResponseFinish" },
    ]);
  });

  it("lets only the responder end a channel: the opener's finish for its own channel is disregarded", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("04 00000001 00000000 07");
    // The client tries to finish its own channel 0: that names a server channel 0, which is not open.
    h.feed("06 00000001 00000000");
    expect(h.disregarded).toEqual([{ reason: "unknown-channel", scope: 1, channel: 0, type: "ChannelResponseFinish" }]);
    const responder = h.channels[0]!.responder;
    expect(responder.finished).toBe(false);
    responder.respond(fromHex("00"));
    expect(h.sent).toEqual(["05000000010000000000"]);
  });

  it("tells a bare finish (not served) from a finish after responses, and ignores bytes after a finish's header", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    const declined = recorder();
    const served = recorder();
    h.mux.openChannel(1, fromHex("0000000001"), declined.handlers);
    h.mux.openChannel(1, fromHex("0000000002"), served.handlers);
    h.feed("06 00000001 00000000 ffff");
    h.feed("05 00000001 00000001 4e");
    h.feed("05 00000001 00000001 4f");
    h.feed("06 00000001 00000001");
    expect(declined.events).toEqual(["bare finish"]);
    expect(served.events).toEqual(["response 4e", "response 4f", "finish"]);
    // Numbers count up; the finished ones are free for later use.
    expect(h.mux.openChannel(1, fromHex("00"), recorder().handlers).channel).toBe(2);
    expect(h.mux.openChannel(1, fromHex("00"), recorder().handlers).channel).toBe(3);
  });

  it("reports an authorization frame and keeps scopes as they were", () => {
    const h = harness("server");
    h.feed("00 00000000 00000000 00746f6b");
    expect(h.authorizations).toEqual(["00746f6b"]);
  });

  it("ends every stream without a finish when the connection ends", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("04 00000001 00000000 07");
    const mine = recorder();
    h.mux.openChannel(1, fromHex("00"), mine.handlers);
    const before = h.sent.length;
    h.mux.end();
    h.channels[0]!.responder.respond(fromHex("00"));
    h.scopes[0]!.responder.finish();
    expect(h.sent.length).toBe(before);
    expect(mine.events).toEqual(["lost"]);
    h.feed("04 00000001 00000001 07");
    expect(h.channels).toHaveLength(1);
    expect(() => h.mux.openChannel(1, fromHex("00"), mine.handlers)).toThrow(MultiplexerError);
  });

  it("ends a scope's channels with the scope's finish", () => {
    const h = harness("server");
    h.feed("01 00000001 00000000 01");
    h.feed("04 00000001 00000000 07");
    const mine = recorder();
    h.mux.openChannel(1, fromHex("00"), mine.handlers);
    h.scopes[0]!.responder.finish();
    expect(mine.events).toEqual(["lost"]);
    h.feed("05 00000001 00000000 00");
    expect(h.disregarded.at(-1)).toEqual({ reason: "unknown-scope", scope: 1, type: "ChannelResponse" });
    expect(() => h.mux.openChannel(1, fromHex("00"), mine.handlers)).toThrow(/not open/);
  });

  it("refuses to open a scope: only clients do", () => {
    const h = harness("server");
    expect(() => h.mux.openScope(fromHex("01"), recorder().handlers)).toThrow(MultiplexerError);
  });
});

describe("the client side", () => {
  it("opens scopes under fresh numbers and reads their answer", () => {
    const h = harness("client");
    const first = recorder();
    const scope = h.mux.openScope(fromHex("01"), first.handlers);
    expect(scope.scope).toBe(1);
    expect(h.sent).toEqual(["01000000010000000001"]);
    expect(h.mux.openScope(fromHex("09"), recorder().handlers).scope).toBe(2);
    h.feed("02 00000001 00000000 005b5d");
    expect(scope.finished).toBe(false);
    h.feed("03 00000001 00000000");
    expect(first.events).toEqual(["response 005b5d", "finish"]);
    expect(scope.finished).toBe(true);
    h.feed("03 00000002 00000000");
    expect(h.disregarded).toEqual([]);
  });

  it("disregards answers for scopes it has not open and frames no server sends", () => {
    const h = harness("client");
    h.feed("02 00000007 00000000 00");
    h.feed("01 00000001 00000000 01");
    expect(h.disregarded.map((d) => d.reason)).toEqual(["unknown-scope", "malformed"]);
  });

  it("answers the server's channels and disregards a second request on a server channel still open", () => {
    const h = harness("client");
    h.mux.openScope(fromHex("01"), recorder().handlers);
    h.feed("04 00000001 00000000 00 00000001");
    h.feed("04 00000001 00000000 00 00000002");
    expect(h.channels).toHaveLength(1);
    expect(h.disregarded).toEqual([{ reason: "channel-open", scope: 1, channel: 0 }]);
    h.channels[0]!.responder.respond(fromHex("4e"));
    h.channels[0]!.responder.finish();
    expect(h.sent.slice(1)).toEqual(["0500000001000000004e", "060000000100000000"]);
  });

  it("opens its own channels and reads their answers", () => {
    const h = harness("client");
    h.mux.openScope(fromHex("01"), recorder().handlers);
    const info = recorder();
    const channel = h.mux.openChannel(1, fromHex("01"), info.handlers);
    expect(h.sent[1]).toBe("04000000010000000001");
    h.feed(`05 00000001 ${channel.channel.toString(16).padStart(8, "0")} 01`);
    h.feed(`06 00000001 ${channel.channel.toString(16).padStart(8, "0")}`);
    expect(info.events).toEqual(["response 01", "finish"]);
    expect(channel.finished).toBe(true);
  });

  it("tells every open stream it was lost when the connection ends", () => {
    const h = harness("client");
    const scope = recorder();
    h.mux.openScope(fromHex("01"), scope.handlers);
    const channel = recorder();
    h.mux.openChannel(1, fromHex("07"), channel.handlers);
    h.mux.end();
    expect(scope.events).toEqual(["lost"]);
    expect(channel.events).toEqual(["lost"]);
  });
});

describe("a response in two parts", () => {
  it("respondParts sends the frame respond sends for the parts joined, in one buffer, on either side and either stream", () => {
    const client = harness("client");
    client.mux.openScope(fromHex("01"), recorder().handlers);
    client.feed("04 00000001 00000003 00");
    const channel = client.channels[0]!.responder;
    channel.respondParts!(fromHex("00"), fromHex("a1a2a3"));
    channel.respond(fromHex("00a1a2a3"));
    channel.respondParts!(fromHex(""), fromHex(""));
    expect(client.sent.slice(1)).toEqual(["050000000100000003" + "00a1a2a3", "050000000100000003" + "00a1a2a3", "050000000100000003"]);
    const server = harness("server");
    server.feed("01 00000002 00000000 01");
    const scope = server.scopes[0]!.responder;
    scope.respondParts!(fromHex("07"), fromHex("beef"));
    scope.finish();
    scope.respondParts!(fromHex("07"), fromHex("beef"));
    expect(server.sent).toEqual(["020000000200000000" + "07beef", "030000000200000000"]);
    expect(scope.responded).toBe(true);
  });

  it("respondParts takes the body in several pieces: the same frame as the pieces joined", () => {
    const server = harness("server");
    server.feed("01 00000002 00000000 01");
    const scope = server.scopes[0]!.responder;
    scope.respondParts!(fromHex("00"), [fromHex("0102"), fromHex(""), fromHex("03"), fromHex("040506")]);
    scope.respondParts!(fromHex(""), []);
    expect(server.sent).toEqual(["020000000200000000" + "00010203040506", "020000000200000000"]);
  });
});

describe("two multiplexers joined back to back", () => {
  it("carry a scope and channels both ways in order", () => {
    let server!: Multiplexer;
    const client = new Multiplexer({ role: "client", send: (frame) => server.receive(frame) });
    const seen: string[] = [];
    server = new Multiplexer({
      role: "server",
      send: (frame) => client.receive(frame),
      events: {
        scope: (responder) => responder.respond(fromHex("00")),
        channel: (responder, payload) => {
          for (let i = 0; i < 3; i++) responder.respond(new Uint8Array([payload[0]!, i]));
          responder.finish();
        },
      },
    });
    const begin = recorder();
    client.openScope(fromHex("01"), begin.handlers);
    for (const tag of [3, 4]) {
      client.openChannel(1, new Uint8Array([tag]), {
        response: (payload) => seen.push(toHex(payload)),
        finish: (served) => seen.push(`finish ${served}`),
      });
    }
    expect(begin.events).toEqual(["response 00"]);
    expect(seen).toEqual(["0300", "0301", "0302", "finish true", "0400", "0401", "0402", "finish true"]);
  });
});
