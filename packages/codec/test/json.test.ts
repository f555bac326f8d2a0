// The JSON reader's failure reasons: serde_json's wording, positions only, never a quote of the input.
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { describeJsonError, findJsonProblem, JsonFailure, readJson } from "../src/runtime/index.js";

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
    ["01", "invalid number at line 1 column 2"],
    ["[-01]", "invalid number at line 1 column 4"],
    ["1e+x", "invalid number at line 1 column 4"],
    ["1e", "EOF while parsing a value at line 1 column 2"],
    ["-x", "invalid number at line 1 column 2"],
    ['"\\u12"', "EOF while parsing a string at line 1 column 6"],
    ['"\\u12x4"', "invalid escape at line 1 column 6"],
    // Columns count bytes, as serde_json's do: é is two.
    ['{"é":tru}', "expected ident at line 1 column 10"],
  ])("%j → %s", (text, expected) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(reason(text)).toBe(expected);
  });

  it("survives nesting far deeper than any stack, refusing it where serde_json's recursion limit does", () => {
    const deep = "[".repeat(200_000);
    expect(reason(deep)).toBe("recursion limit exceeded at line 1 column 128");
    const bytes = new TextEncoder().encode("[".repeat(100_000) + "]".repeat(100_000));
    expect(() => readJson(bytes, 0, bytes.length)).toThrow(JsonFailure);
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
    // An exponent past i32 is refused at the digit that overflowed it.
    ["1e99999999999", "number out of range at line 1 column 12"],
    ["[1E+2147483648]", "number out of range at line 1 column 14"],
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

/** What `readJson` says about `text`: the value, or the reason it refused. */
function read(text: string): { value: unknown } | { reason: string } {
  const bytes = new TextEncoder().encode(text);
  try {
    return { value: readJson(bytes, 0, bytes.length) };
  } catch (error) {
    if (!(error instanceof JsonFailure)) throw error;
    return { reason: error.reason };
  }
}

describe("lone surrogates: a string, key or value, must be Unicode text", () => {
  it.each([
    // The secret: a leading surrogate and then the closing quote.
    ['{"API_KEY":"abc\\ud800"}', "unexpected end of hex escape at line 1 column 22"],
    ['"\\ud800"', "unexpected end of hex escape at line 1 column 8"],
    ['"\\uD800\\n"', "unexpected end of hex escape at line 1 column 9"],
    ['"\\ud800\\u0041"', "lone leading surrogate in hex escape at line 1 column 13"],
    ['"\\ud800\\ud800"', "lone leading surrogate in hex escape at line 1 column 13"],
    // A trailing surrogate alone: serde_json calls it a lone leading one too.
    ['"\\udc00"', "lone leading surrogate in hex escape at line 1 column 7"],
    ['"a\\uDFFFb"', "lone leading surrogate in hex escape at line 1 column 8"],
    // Object keys are strings like any other.
    ['{"\\udfff":1}', "lone leading surrogate in hex escape at line 1 column 8"],
    ['{"ok":{"\\ud83d":true}}', "unexpected end of hex escape at line 1 column 15"],
    ['"\\\\\\ud800"', "unexpected end of hex escape at line 1 column 10"],
    ['"\\ud800', "EOF while parsing a string at line 1 column 7"],
    ['"\\ud800\\', "EOF while parsing a string at line 1 column 8"],
    ['"\\ud800\\u12', "EOF while parsing a string at line 1 column 11"],
    ['{"é":"\\udc00"}', "lone leading surrogate in hex escape at line 1 column 13"],
    ['[1,\n "\\udc00"]', "lone leading surrogate in hex escape at line 2 column 8"],
  ])("%s is refused: %s", (text, expected) => {
    expect(read(text)).toEqual({ reason: expected });
    expect(describeJsonError(text)).toBe(expected);
  });

  it("the first complaint in reading order wins, as serde_json reads", () => {
    expect(read('["\\udc00", 1e999]')).toEqual({ reason: "lone leading surrogate in hex escape at line 1 column 8" });
    expect(read('[1e999, "\\udc00"]')).toEqual({ reason: "number out of range at line 1 column 6" });
    expect(describeJsonError('["\\udc00", tru]')).toBe("lone leading surrogate in hex escape at line 1 column 8");
  });

  it("keeps pairs, escaped backslashes and surrogate-looking text", () => {
    expect(read('"\\ud83d\\ude00"')).toEqual({ value: "\u{1F600}" });
    expect(read('{"\\uD83D\\uDE00":"x"}')).toEqual({ value: { "\u{1F600}": "x" } });
    expect(read('"\\\\ud800"')).toEqual({ value: "\\ud800" });
    expect(read('"\\u00e9 \\\\udc00 \\u0041"')).toEqual({ value: "é \\udc00 A" });
    expect(read('"😀 \\ud7ff \\ue000"')).toEqual({ value: "😀 \ud7ff \ue000" });
  });

  it("refuses exactly what leaves a string that is not well-formed, for any JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4, stringUnit: "binary" }), (value) => {
        const text = JSON.stringify(value);
        const wellFormed = (v: unknown): boolean =>
          typeof v === "string"
            ? v.isWellFormed()
            : typeof v === "object" && v !== null
              ? Object.entries(v).every(([k, item]) => k.isWellFormed() && wellFormed(item))
              : true;
        const result = read(text);
        if (wellFormed(value)) expect(result).toEqual({ value: JSON.parse(text) });
        else expect(result).toMatchObject({ reason: expect.stringMatching(/^(lone leading surrogate in hex escape|unexpected end of hex escape) at line 1 column \d+$/) });
      }),
      { numRuns: 3_000 },
    );
  });
});

describe("nesting: serde_json's recursion limit of 128", () => {
  it("keeps 127 nested arrays or objects and refuses the 128th, where it opens", () => {
    expect(read("[".repeat(127) + "]".repeat(127))).toHaveProperty("value");
    expect(read("[".repeat(128) + "]".repeat(128))).toEqual({ reason: "recursion limit exceeded at line 1 column 128" });
    expect(read('{"a":'.repeat(127) + "{}" + "}".repeat(127))).toEqual({ reason: "recursion limit exceeded at line 1 column 636" });
    expect(read('{"a":'.repeat(126) + "[]" + "}".repeat(126))).toHaveProperty("value");
    // Empty containers count as serde_json counts them: on opening.
    expect(read("[".repeat(127) + "[]" + "]".repeat(127))).toEqual({ reason: "recursion limit exceeded at line 1 column 128" });
  });

  it("refuses 5,000-deep params as a failure to read, never a stack overflow", () => {
    const text = `{"name":"deep","arguments":${'{"a":'.repeat(5_000)}1${"}".repeat(5_000)}}`;
    expect(read(text)).toEqual({ reason: "recursion limit exceeded at line 1 column 658" });
  });
});

describe("what readJson accepts is what findJsonProblem finds nothing in", () => {
  it("agrees on any text", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json({ maxDepth: 3 }),
          fc.string({ unit: fc.constantFrom("[", "]", "{", "}", '"', "\\", "u", "d", "8", "0", "c", "e", "1", ",", ":", " ", "-", ".") , maxLength: 30 }),
        ),
        (text) => {
          const result = read(text);
          const problem = findJsonProblem(text);
          if (problem === undefined) expect(result).toEqual({ value: JSON.parse(text) });
          else expect(result).toEqual({ reason: problem });
        },
      ),
      { numRuns: 5_000 },
    );
  });
});

describe("payloads under 256 bytes: one pass over the bytes instead of a walk of the value", () => {
  it("reads the same as the walk does, on both sides of the threshold", () => {
    // Padding inside a string moves a text across 256 bytes without moving any complaint's column
    // before the padding; the short and the long path must agree on everything.
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json({ maxDepth: 3 }),
          fc.string({ unit: fc.constantFrom("[", "]", "{", "}", '"', "\\", "u", "d", "8", "0", "e", "E", "1", "9", ",", ":", " ", "-", ".", "é") , maxLength: 40 }),
        ),
        fc.integer({ min: 0, max: 260 }),
        (tail, pad) => {
          const text = `["${"x".repeat(pad)}",${tail}]`;
          const result = read(text);
          const problem = findJsonProblem(text);
          if (problem === undefined) expect(result).toEqual({ value: JSON.parse(text) });
          else expect(result).toEqual({ reason: problem });
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it.each([
    ["[1e999]", "number out of range at line 1 column 6"],
    ["[-1E400]", "number out of range at line 1 column 7"],
    ["[0.5e+999]", "number out of range at line 1 column 9"],
    ['{"a":"\\ud800"}', "unexpected end of hex escape at line 1 column 13"],
  ])("still refuses %s: %s", (text, expected) => {
    expect(read(text)).toEqual({ reason: expected });
  });

  it("keeps exponent-looking and escaped text that is fine", () => {
    expect(read('{"a":"1e999","b":"\\n","c":2e3}')).toEqual({ value: { a: "1e999", b: "\n", c: 2000 } });
    expect(read('["é", "ü\\u00fc", 1]')).toEqual({ value: ["é", "üü", 1] });
  });

  it("reads the bytes of a view at an offset, a Node Buffer from a pool among them", () => {
    const text = '{"name":"query","arguments":{"limit":10}}';
    const framed = new TextEncoder().encode(`xx${text}yy`);
    const view = framed.subarray(1, framed.length - 1);
    expect(readJson(view, 1, view.length - 1)).toEqual(JSON.parse(text));
    const pooled = Buffer.from(`xx${text}`);
    expect(readJson(pooled, 2, pooled.length)).toEqual(JSON.parse(text));
    const bad = Buffer.from([0x22, 0xc3, 0x28, 0x22]);
    expect(() => readJson(bad, 0, bad.length)).toThrow(JsonFailure);
  });

  it("reads the same where the host has no Buffer (a browser)", async () => {
    vi.stubGlobal("Buffer", undefined);
    vi.resetModules();
    try {
      const bare = await import("../src/runtime/json.js");
      for (const text of ['{"name":"query","arguments":{"sql":"select 1","limit":10}}', "[1e999]", '"\\udc00"', '["é"]', "tru"]) {
        const bytes = new TextEncoder().encode(text);
        const outcome = (read: typeof readJson) => {
          try {
            return { value: read(bytes, 0, bytes.length) };
          } catch (error) {
            return { reason: (error as JsonFailure).reason };
          }
        };
        expect(outcome(bare.readJson)).toEqual(outcome(readJson));
      }
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });
});
