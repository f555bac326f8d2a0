// The proxy's decoders never throw anything but their typed error, even for JSON nested far past any
// stack: the reason the server keeps no `instanceof RangeError` fallback where it decodes what a peer
// sent (the multiplexed scopes and channels, the paths' first messages, every exchange's answer). The
// codec refuses the 128th nested array or object (serde_json's limit) before any check walks it.
import { describe, expect, it } from "vitest";
import {
  DecodeError,
  decodeContainerProxyRequest,
  decodeFilesystemPathsRequest,
  decodeFuseMountPathsRequest,
  decodeToolsBeginChannelRequest,
} from "@diverge/codec";
import { openedPaths, requestsAskExchanges } from "@diverge/codec/exchanges";
import { checkMcp } from "@diverge/codec/mcp";

const DEPTH = 50_000;
const deepArray = "[".repeat(DEPTH) + "]".repeat(DEPTH);
const deepObject = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);
const deepInValue = `{"name":"x","arguments":${deepArray},"params":${deepObject}}`;

/** Every payload shape these frames take (a tag byte, or none, then JSON), with deep JSON in it. */
function hostilePayloads(): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const json of [deepArray, deepObject, deepInValue]) {
    const text = new TextEncoder().encode(json);
    out.push(text);
    for (let tag = 0; tag < 16; tag++) {
      const framed = new Uint8Array(1 + text.length);
      framed[0] = tag;
      framed.set(text, 1);
      out.push(framed);
    }
  }
  return out;
}

function outcome(decode: () => unknown): "decoded" | "typed" | string {
  try {
    decode();
    return "decoded";
  } catch (problem) {
    if (problem instanceof DecodeError) return "typed";
    return problem instanceof Error ? `${problem.name}: ${problem.message}` : String(problem);
  }
}

const decoders: [string, (bytes: Uint8Array) => unknown][] = [
  ["container proxy request (multiplexed scopes)", (bytes) => decodeContainerProxyRequest(bytes)],
  ["tools::begin channel request (multiplexed channels)", (bytes) => decodeToolsBeginChannelRequest(bytes, { check: checkMcp })],
  ["filesystem paths request", (bytes) => decodeFilesystemPathsRequest(bytes)],
  ["fuse mount paths request", (bytes) => decodeFuseMountPathsRequest(bytes)],
  ...Object.entries(requestsAskExchanges).flatMap(([name, exchange]) => (exchange.answer ? [[`${name} answer`, (bytes: Uint8Array) => exchange.answer!.decode(bytes, { check: checkMcp })] as [string, (bytes: Uint8Array) => unknown]] : [])),
  ...Object.entries(openedPaths).flatMap(([name, path]) => [
    ...(path.request.codec ? [[`${name} request`, (bytes: Uint8Array) => path.request.codec!.decode(bytes, { check: checkMcp })] as [string, (bytes: Uint8Array) => unknown]] : []),
    ...(path.answer ? [[`${name} answer`, (bytes: Uint8Array) => path.answer!.decode(bytes, { check: checkMcp })] as [string, (bytes: Uint8Array) => unknown]] : []),
  ]),
];

describe("decoders of what a peer sends", () => {
  it.each(decoders)("%s: JSON nested 50 000 deep is its typed error (or, for a binary frame, bytes it reads), never a RangeError", (_name, decode) => {
    for (const payload of hostilePayloads()) expect(["typed", "decoded"]).toContain(outcome(() => decode(payload)));
  });

  it("the JSON frames refuse it: every MCP answer, the scope and channel requests, the paths' requests", () => {
    const json = [decodeContainerProxyRequest, decodeFilesystemPathsRequest, decodeFuseMountPathsRequest];
    for (const decode of json) for (const payload of hostilePayloads()) expect(outcome(() => decode(payload))).toBe("typed");
    for (const exchange of [requestsAskExchanges.McpListTools, requestsAskExchanges.McpCallTool, requestsAskExchanges.McpReadResource, requestsAskExchanges.McpListResources, requestsAskExchanges.McpNotifications]) {
      for (const payload of hostilePayloads()) expect(outcome(() => exchange.answer!.decode(payload, { check: checkMcp }))).toBe("typed");
    }
  });
});
