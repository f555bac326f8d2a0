// Caps on what the other party may hold open: scopes and channels beyond them get a bare finish at
// once and leave no state behind; finished ones free their place.
import { describe, expect, it } from "vitest";
import { fromHex, toHex } from "@diverge/codec";
import { Multiplexer } from "../src/index.js";

function server(maxOpenScopes: number, maxOpenChannels: number) {
  const sent: string[] = [];
  const overCap: string[] = [];
  const responders: import("../src/index.js").Responder[] = [];
  const mux = new Multiplexer({
    role: "server",
    maxOpenScopes,
    maxOpenChannels,
    send: (frame) => sent.push(toHex(frame)),
    events: {
      scope: (responder) => responders.push(responder),
      channel: (responder) => responders.push(responder),
      overCap: (what) => overCap.push(`${what.kind} ${what.scope}${what.kind === "channel" ? ` ${what.channel}` : ""}`),
    },
  });
  const feed = (hex: string) => mux.receive(fromHex(hex.replace(/ /g, "")));
  return { mux, sent, overCap, responders, feed };
}

describe("caps on open scopes and channels", () => {
  it("answers a scope request beyond the cap with a bare finish and keeps nothing for it", () => {
    const { mux, sent, overCap, feed } = server(2, 10);
    feed("01 00000001 00000000 aa");
    feed("01 00000002 00000000 bb");
    feed("01 00000003 00000000 cc");
    expect(mux.openScopes()).toEqual([1, 2]);
    expect(sent).toEqual(["030000000300000000"]);
    expect(overCap).toEqual(["scope 3"]);
  });

  it("answers channel requests beyond the cap with a bare finish; a finished channel frees its place", () => {
    const { mux, sent, overCap, responders, feed } = server(4, 2);
    feed("01 00000001 00000000 aa");
    feed("04 00000001 00000000 01");
    feed("04 00000001 ffffffff 01");
    feed("04 00000001 00000005 01");
    expect(sent).toEqual(["060000000100000005"]);
    expect(overCap).toEqual(["channel 1 5"]);
    expect(mux.openTheirChannels).toBe(2);
    responders[1]!.finish();
    expect(mux.openTheirChannels).toBe(1);
    feed("04 00000001 00000005 01");
    expect(mux.openTheirChannels).toBe(2);
    expect(responders).toHaveLength(4);
    // The scope's finish takes its channels with it.
    responders[0]!.finish();
    expect(mux.openTheirChannels).toBe(0);
  });

  it("counts channels across scopes, and forgets them all when the connection ends", () => {
    const { mux, overCap, feed } = server(4, 3);
    feed("01 00000001 00000000 aa");
    feed("01 00000002 00000000 aa");
    for (let c = 0; c < 5; c++) feed(`04 00000001 0000000${c} 01`);
    for (let c = 0; c < 5; c++) feed(`04 00000002 0000000${c} 01`);
    expect(mux.openTheirChannels).toBe(3);
    expect(overCap).toHaveLength(7);
    mux.end();
    expect(mux.openTheirChannels).toBe(0);
  });
});
