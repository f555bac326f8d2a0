// toHex / fromHex: what the README's examples and the conformance vectors are written in.
import { describe, expect, it } from "vitest";
import { fromHex, toHex } from "../src/index.js";

describe("fromHex", () => {
  it("reads either case, with whitespace between bytes", () => {
    expect(fromHex("00 0A\nff\tFe")).toEqual(Uint8Array.from([0x00, 0x0a, 0xff, 0xfe]));
    expect(fromHex("")).toEqual(new Uint8Array(0));
    expect(toHex(fromHex("DEADbeef"))).toBe("deadbeef");
  });

  it("says which character is not hex, by index and without quoting it", () => {
    expect(() => fromHex("zz")).toThrow(new RangeError("not hex: the character at index 0 is not a hex digit (0-9, a-f, A-F) or whitespace"));
    expect(() => fromHex("00 0g")).toThrow(new RangeError("not hex: the character at index 4 is not a hex digit (0-9, a-f, A-F) or whitespace"));
    // Odd and not hex: the character is the first thing wrong.
    expect(() => fromHex("abc!")).toThrow(/index 3 is not a hex digit/);
  });

  it("says when a digit is left over", () => {
    expect(() => fromHex("abc")).toThrow(new RangeError("not an even number of hex digits: 3 digits, half a byte left over"));
    expect(() => fromHex("0 0 0")).toThrow(new RangeError("not an even number of hex digits: 3 digits, half a byte left over"));
  });
});
