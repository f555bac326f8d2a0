// The hand-written baselines and the protobuf peer must handle the same frames the codec does, or
// the comparison means nothing.
import { describe, expect, it } from "vitest";
import {
  decodeClientFrame,
  decodeMcpReadResourceAnswer,
  decodePostgresRequest,
  decodeRequestsAsk,
  encodeClientFrame,
  encodeMcpListToolsAnswer,
  encodePostgresRequest,
  encodeRequestsAsk,
  encodeToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import * as base from "../src/baseline.js";
import { pbDecodeCallTool, pbDecodeClientFrame, pbDecodePostgres, pbEncodeCallTool, pbEncodeClientFrame, pbEncodePostgres } from "../src/protobuf.js";
import { callToolParams, listToolsResult, readResourceResult } from "../src/samples.js";

describe("the hand-written baselines", () => {
  it("write and read exactly the codec's bytes", () => {
    const postgres = { connection_id: 0xdeadbeef };
    const bytes = encodePostgresRequest(postgres);
    expect(base.dvEncodePostgres(postgres)).toEqual(bytes);
    expect(base.shEncodePostgres(postgres)).toEqual(bytes);
    expect(base.dvDecodePostgres(bytes)).toEqual(decodePostgresRequest(bytes));
    expect(base.shDecodePostgres(bytes)).toEqual(decodePostgresRequest(bytes));

    const frame = { variant: "ChannelResponse", scope: 7, channel: 0x01020304, payload: new Uint8Array(16).fill(0x61) } as const;
    const frameBytes = encodeClientFrame(frame);
    expect(base.dvEncodeClientFrame(frame)).toEqual(frameBytes);
    expect(base.shEncodeClientFrame(frame)).toEqual(frameBytes);
    expect(base.dvDecodeClientFrame(frameBytes)).toEqual(decodeClientFrame(frameBytes));
    expect(base.shDecodeClientFrame(frameBytes)).toEqual(decodeClientFrame(frameBytes));

    const ask = { variant: "Postgres", channel: 0x0a0b0c0d } as const;
    const askBytes = encodeRequestsAsk(ask);
    expect(base.dvEncodeAskPostgres(ask)).toEqual(askBytes);
    expect(base.shEncodeAskPostgres(ask)).toEqual(askBytes);
    expect(base.dvDecodeAskHeader(askBytes)).toEqual(decodeRequestsAsk(askBytes));
    expect(base.shDecodeAskHeader(askBytes)).toEqual(decodeRequestsAsk(askBytes));
  });

  it("bare JSON reads and writes the same JSON as the codec", () => {
    const bytes = encodeToolsBeginChannelRequest({ variant: "McpCallTool", params: callToolParams });
    expect(bytes[0]).toBe(5);
    expect(base.bareJsonDecode(bytes)).toEqual(callToolParams);
    expect(base.bareJsonEncode(callToolParams)).toEqual(bytes.subarray(1));
    const list = listToolsResult();
    expect(base.bareJsonEncode(list)).toEqual(encodeMcpListToolsAnswer({ variant: "Result", result: list }).subarray(1));
  });

  it("the samples are the sizes the issue names and are valid MCP", () => {
    expect(JSON.stringify(callToolParams).length).toBeGreaterThan(80);
    expect(JSON.stringify(callToolParams).length).toBeLessThan(130);
    expect(checkMcp("CallToolRequestParams", callToolParams)).toBeUndefined();
    const list = listToolsResult();
    expect(JSON.stringify(list).length).toBeGreaterThan(9_000);
    expect(JSON.stringify(list).length).toBeLessThan(14_000);
    expect(checkMcp("ListToolsResult", list)).toBeUndefined();
    const read = readResourceResult();
    const readBytes = new TextEncoder().encode(JSON.stringify(read));
    expect(readBytes.length).toBeGreaterThan(1_000_000);
    expect(readBytes.length).toBeLessThan(1_200_000);
    const framed = new Uint8Array(1 + readBytes.length);
    framed.set(readBytes, 1);
    expect(decodeMcpReadResourceAnswer(framed, { check: checkMcp })).toEqual({ variant: "Result", result: read });
  });
});

describe("the protobuf-es peer", () => {
  it("round-trips the same values", () => {
    expect(pbDecodePostgres(pbEncodePostgres({ connectionId: 0xdeadbeef })).connectionId).toBe(0xdeadbeef);
    const frame = { type: 5, scope: 7, channel: 0x01020304, payload: new Uint8Array(16).fill(0x61) };
    const back = pbDecodeClientFrame(pbEncodeClientFrame(frame));
    expect({ type: back.type, scope: back.scope, channel: back.channel, payload: back.payload }).toEqual(frame);
    expect(pbDecodeCallTool(pbEncodeCallTool(callToolParams))).toEqual(callToolParams);
    // fixed32 is a one-byte key and four bytes, as the spec's u32 is four bytes.
    expect(pbEncodePostgres({ connectionId: 0xdeadbeef }).length).toBe(5);
  });
});
