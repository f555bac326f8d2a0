// What the provider decodes from the proxy (the /requests asks, every opened path's answer) never
// throws anything but its typed error, even for JSON nested far past any stack: the reason the client
// keeps no `instanceof RangeError` fallback where it reads them. The codec refuses the 128th nested
// array or object (serde_json's limit) before `checkMcp` walks it.
import { describe, expect, it } from "vitest";
import { DecodeError, decodeRequestsAsk, RequestsAskError } from "@diverge/codec";
import { openedPaths } from "@diverge/codec/exchanges";
import { checkMcp } from "@diverge/codec/mcp";

const DEPTH = 50_000;
const deepArray = "[".repeat(DEPTH) + "]".repeat(DEPTH);
const deepObject = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);
const deepInValue = `{"name":"x","arguments":${deepArray},"_meta":${deepObject}}`;
const encoder = new TextEncoder();

function framed(prefix: number[], json: string): Uint8Array {
  const text = encoder.encode(json);
  const bytes = new Uint8Array(prefix.length + text.length);
  bytes.set(prefix);
  bytes.set(text, prefix.length);
  return bytes;
}

describe("the provider's decoders of what the proxy sends", () => {
  it.each([deepArray, deepObject, deepInValue])("a /requests ask of every kind with JSON nested 50 000 deep is a RequestsAskError or decodes (%#)", (json) => {
    for (let kind = 0; kind < 20; kind++) {
      const bytes = framed([0, 0, 0, 7, kind], json);
      try {
        decodeRequestsAsk(bytes, { check: checkMcp });
      } catch (problem) {
        expect(problem, `kind ${kind}`).toBeInstanceOf(RequestsAskError);
      }
    }
  });

  it.each(Object.entries(openedPaths).filter(([, path]) => path.answer))("%s: an answer with JSON nested 50 000 deep is its typed error or decodes", (_name, path) => {
    for (const json of [deepArray, deepObject, deepInValue]) {
      for (let tag = 0; tag < 4; tag++) {
        try {
          path.answer!.decode(framed([tag], json), { check: checkMcp });
        } catch (problem) {
          expect(problem).toBeInstanceOf(DecodeError);
        }
      }
    }
  });
});
