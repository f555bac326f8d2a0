// The JSON reader's failure reasons: serde_json's wording, positions only, never a quote of the input.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { describeJsonError, JsonFailure, readJson } from "../src/runtime/index.js";

const reason = (text: string) => describeJsonError(text);

describe("describeJsonError", () => {
  it.each([
    ["", "EOF while parsing a value at line 1 column 0"],
    ["   ", "EOF while parsing a value at line 1 column 3"],
    ['{"name":', "EOF while parsing a value at line 1 column 8"],
    ['{"a":"b', "EOF while parsing a string at line 1 column 7"],
    ["nope", "expected ident at line 1 column 2"],
    ["x", "expected value at line 1 column 1"],
    ["{} x", "trailing characters at line 1 column 4"],
    ['{"a":1,}', "trailing comma at line 1 column 8"],
    ["[1,]", "trailing comma at line 1 column 4"],
    ["{1:2}", "key must be a string at line 1 column 2"],
    ['{"a" 1}', "expected `:` at line 1 column 6"],
    ['{"a":1 "b":2}', "expected `,` or `}` at line 1 column 8"],
    ["[1 2]", "expected `,` or `]` at line 1 column 4"],
    ['"\\q"', "invalid escape at line 1 column 3"],
    ['"a\u0001"', "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 3"],
    ["{\n  \"a\": tru\n}", "expected ident at line 2 column 11"],
    ["[", "EOF while parsing a list at line 1 column 1"],
    ["{", "EOF while parsing an object at line 1 column 1"],
    ["-", "EOF while parsing a value at line 1 column 1"],
    ["1.", "EOF while parsing a value at line 1 column 2"],
  ])("%j → %s", (text, expected) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(reason(text)).toBe(expected);
  });

  it("survives nesting far deeper than any stack", () => {
    const deep = "[".repeat(200_000);
    expect(reason(deep)).toBe("EOF while parsing a list at line 1 column 200000");
    const bytes = new TextEncoder().encode("[".repeat(100_000) + "]".repeat(100_000));
    expect(readJson(bytes, 0, bytes.length)).toBeInstanceOf(Array);
  });

  it("finds a reason for every string JSON.parse refuses, and quotes none of it", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (text) => {
        let parsed = true;
        try {
          JSON.parse(text);
        } catch {
          parsed = false;
        }
        fc.pre(!parsed);
        const why = reason(text);
        expect(why).toMatch(/^[a-zA-Z ,`:;{}()\]\[\\\-0-9]+ at line \d+ column \d+$|^invalid JSON$/);
      }),
      { numRuns: 5_000 },
    );
  });
});

describe("readJson", () => {
  it("refuses bytes that are not UTF-8, saying where", () => {
    const bytes = Uint8Array.from([0x7b, 0x22, 0xff, 0x22, 0x7d]);
    try {
      readJson(bytes, 0, bytes.length);
      throw new Error("accepted invalid UTF-8");
    } catch (error) {
      expect(error).toBeInstanceOf(JsonFailure);
      expect((error as JsonFailure).reason).toBe("invalid utf-8 at byte 2");
    }
  });

  it("carries __proto__ and constructor keys as data, polluting nothing", () => {
    const bytes = new TextEncoder().encode('{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}');
    const value = readJson(bytes, 0, bytes.length) as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(value, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
  });
});

describe("numbers JSON cannot carry back", () => {
  it.each([
    ['{"code":-3e2601,"message":"x"}', "number out of range at line 1 column 15"],
    ["[1, 1e999]", "number out of range at line 1 column 9"],
    [`[${"9".repeat(400)}]`, "number out of range at line 1 column 401"],
  ])("%s is refused: %s", (text, expected) => {
    const bytes = new TextEncoder().encode(text);
    expect(() => readJson(bytes, 0, bytes.length)).toThrow(JsonFailure);
    try {
      readJson(bytes, 0, bytes.length);
    } catch (error) {
      expect((error as JsonFailure).reason).toBe(expected);
    }
  });

  it("keeps large finite numbers and exponent-looking strings", () => {
    const bytes = new TextEncoder().encode('{"a":1e300,"b":"1e999","c":-2.5E-300}');
    expect(readJson(bytes, 0, bytes.length)).toEqual({ a: 1e300, b: "1e999", c: -2.5e-300 });
  });
});
