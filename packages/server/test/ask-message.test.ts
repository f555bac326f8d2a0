// An ask whose last field is a large body (a file written back whole) goes out in two parts, the ask
// with that field empty and then the body: joined, exactly the ask's whole encoding. The board sends
// the parts as the fragments of one message; the client's FUSE suites read them back through a real
// mount (fuse-ops: files of 1 and 5 MiB written back whole on paths).
import { requestsAskExchanges, requestsAskExchangesByKind } from "@diverge/codec/exchanges";
import { describe, expect, it } from "vitest";
import { askMessage, encodeAskOnRequests } from "../src/exchanges/engine.js";

function joined(message: Uint8Array | readonly Uint8Array[]): Buffer {
  return Buffer.concat(message instanceof Uint8Array ? [message] : [...message]);
}

describe("askMessage", () => {
  const body = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7) & 0xff);

  it("sends a large tail apart, the same bytes as the whole ask", () => {
    const ask = { id: "mount-1", path: "dir/file.bin", data: body(200_000) };
    const message = askMessage(requestsAskExchanges.FuseWrite, 9, ask, encodeAskOnRequests);
    expect(message instanceof Uint8Array).toBe(false);
    const parts = message as readonly Uint8Array[];
    expect(parts).toHaveLength(2);
    // The body itself, not a copy of it.
    expect(parts[1]).toBe(ask.data);
    expect(Buffer.compare(joined(message), Buffer.from(encodeAskOnRequests(9, "FuseWrite", ask)))).toBe(0);
  });

  it("keeps a small ask, and an ask with no tail field, whole", () => {
    const small = askMessage(requestsAskExchanges.FuseWrite, 1, { id: "m", path: "f", data: body(10) }, encodeAskOnRequests);
    expect(small instanceof Uint8Array).toBe(true);
    const stat = askMessage(requestsAskExchanges.FuseStat, 1, { id: "m", path: "f" }, encodeAskOnRequests);
    expect(stat instanceof Uint8Array).toBe(true);
  });

  it("names, for every exchange that has one, a tail field that is the ask's last, bytes to the end of the frame", () => {
    const tails = [...requestsAskExchangesByKind.values()].filter((x) => x.askTail !== undefined);
    expect(tails.map((x) => x.kindName)).toContain("FuseWrite");
    for (const x of tails) {
      // An empty tail and a one-byte tail differ in the last byte only: the field is the frame's end.
      const empty = Buffer.from(encodeAskOnRequests(3, x.kindName, sampleAsk(x.kindName, x.askTail!, new Uint8Array(0))));
      const one = Buffer.from(encodeAskOnRequests(3, x.kindName, sampleAsk(x.kindName, x.askTail!, new Uint8Array([0xab]))));
      expect(one.length, x.kindName).toBe(empty.length + 1);
      expect(Buffer.compare(one.subarray(0, empty.length), empty), x.kindName).toBe(0);
      expect(one.at(-1)).toBe(0xab);
    }
  });
});

/** An ask of `kindName` with its tail field `bytes` and its other fields at plain values. */
function sampleAsk(kindName: string, tail: string, bytes: Uint8Array): object {
  const others: Record<string, Record<string, unknown>> = {
    FuseWrite: { id: "m", path: "p" },
    VaultSet: { key: "k" },
  };
  return { ...(others[kindName] ?? {}), [tail]: bytes };
}
