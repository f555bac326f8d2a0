// The Secrets variant's error quotes no byte of the secrets, whatever way the feed is broken.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeToolsBeginChannelRequest, ToolsBeginChannelRequestError } from "../src/index.js";

const encoder = new TextEncoder();
/** A recognisable secret: long enough that finding it in a message cannot be chance. */
const secret = fc.string({ unit: "grapheme-ascii", minLength: 8, maxLength: 24 }).map((s) => `S3CR3T-${s}`);

/** Ways to break a secrets feed around a value. */
const brokenFeeds = (value: string): string[] => {
  const quoted = JSON.stringify(value);
  return [
    `{"API_KEY":${quoted}`, // unterminated object
    `{"API_KEY":${quoted.slice(0, -1)}`, // unterminated string
    `{"API_KEY":${quoted},}`, // trailing comma
    `{"API_KEY" ${quoted}}`, // missing colon
    `{"API_KEY":${quoted} x}`, // garbage after the value
    `[${quoted}]`, // not an object
    `${quoted}`, // a bare string
    `{"API_KEY":${quoted},"N":7}`, // a value that is not a string
    `{"API_KEY":${quoted}} ${quoted}`, // trailing characters
    `{${quoted}:1}`, // the secret as a key with a number
    `{"API_KEY":${quoted.slice(0, -1)}\\ud800"}`, // a lone leading surrogate after the secret
    `{"API_KEY":"\\udc00${quoted.slice(1)}}`, // a lone trailing surrogate before it
    `{${quoted.slice(0, -1)}\\udfff":"x"}`, // a lone surrogate in the secret's key
  ];
};

describe("Secrets decode errors", () => {
  it("never contain the secret, for every way the feed can be broken", () => {
    fc.assert(
      fc.property(secret, (value) => {
        for (const feed of brokenFeeds(value)) {
          const bytes = Uint8Array.from([8, ...encoder.encode(feed)]);
          let error: unknown;
          try {
            decodeToolsBeginChannelRequest(bytes);
          } catch (e) {
            error = e;
          }
          expect(error, feed).toBeInstanceOf(ToolsBeginChannelRequestError);
          const e = error as ToolsBeginChannelRequestError;
          expect(e.variant).toBe("Secrets");
          expect(e.message.startsWith("secrets feed did not parse: ")).toBe(true);
          expect(e.message).not.toContain("S3CR3T");
          expect(String(e.stack)).not.toContain("S3CR3T");
          expect(JSON.stringify(e.detail)).not.toContain("S3CR3T");
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("Secrets values are Unicode text", () => {
  it("refuses a value with a lone surrogate escape as the Secrets variant, quoting none of it", () => {
    const bytes = Uint8Array.from([8, ...encoder.encode('{"API_KEY":"abc\\ud800"}')]);
    let error: unknown;
    try {
      decodeToolsBeginChannelRequest(bytes);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ToolsBeginChannelRequestError);
    const e = error as ToolsBeginChannelRequestError;
    expect(e.detail).toEqual({ variant: "Secrets", reason: "unexpected end of hex escape at line 1 column 22" });
    expect(e.message).toBe("secrets feed did not parse: unexpected end of hex escape at line 1 column 22");
    expect(e.message).not.toContain("abc");
  });

  it("keeps a value written with a surrogate pair", () => {
    const bytes = Uint8Array.from([8, ...encoder.encode('{"API_KEY":"abc\\ud83d\\ude00"}')]);
    expect(decodeToolsBeginChannelRequest(bytes)).toEqual({ variant: "Secrets", values: { API_KEY: "abc\u{1F600}" } });
  });
});
