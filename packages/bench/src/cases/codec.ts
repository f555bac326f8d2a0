// Cases 1–3: the generated codec against the hand-written DataView limit, against bare JSON, and
// against protobuf-es.
import {
  decodeClientFrame,
  decodeMcpListToolsAnswer,
  decodeMcpReadResourceAnswer,
  decodePostgresRequest,
  decodeRequestsAsk,
  decodeToolsBeginChannelRequest,
  encodeClientFrame,
  encodeMcpListToolsAnswer,
  encodeMcpReadResourceAnswer,
  encodePostgresRequest,
  encodeRequestsAsk,
  encodeToolsBeginChannelRequest,
  type ClientFrame,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import {
  bareJsonDecode,
  bareJsonEncode,
  dvDecodeAskHeader,
  dvDecodeClientFrame,
  dvDecodePostgres,
  dvEncodeAskPostgres,
  dvEncodeClientFrame,
  dvEncodePostgres,
  shDecodeAskHeader,
  shDecodeClientFrame,
  shDecodePostgres,
  shEncodeAskPostgres,
  shEncodeClientFrame,
  shEncodePostgres,
} from "../baseline.js";
import { compare, type GroupResult, type Timing } from "../measure.js";
import {
  pbDecodeCallTool,
  pbDecodeClientFrame,
  pbDecodePostgres,
  pbEncodeCallTool,
  pbEncodeClientFrame,
  pbEncodePostgres,
} from "../protobuf.js";
import { callToolParams, listToolsResult, readResourceResult } from "../samples.js";

const checked = { check: checkMcp };

/** Case 1: fixed-size frames, generated vs hand-written DataView. Baseline first. */
export async function fixedFrames(timing: Timing): Promise<GroupResult[]> {
  const postgres = { connection_id: 0xdead_beef };
  const postgresBytes = encodePostgresRequest(postgres);
  const frame: ClientFrame = { variant: "ChannelResponse", scope: 7, channel: 0x0102_0304, payload: new Uint8Array(16).fill(0x61) };
  const frameBytes = encodeClientFrame(frame);
  const ask = { variant: "Postgres", channel: 0x0a0b_0c0d } as const;
  const askBytes = encodeRequestsAsk(ask);
  return [
    await compare("fixed: postgres/request decode", [
      { name: "DataView", run: () => dvDecodePostgres(postgresBytes) },
      { name: "hand-written shifts", run: () => shDecodePostgres(postgresBytes) },
      { name: "generated", run: () => decodePostgresRequest(postgresBytes) },
    ], timing),
    await compare("fixed: postgres/request encode", [
      { name: "DataView", run: () => dvEncodePostgres(postgres) },
      { name: "hand-written shifts", run: () => shEncodePostgres(postgres) },
      { name: "generated", run: () => encodePostgresRequest(postgres) },
    ], timing),
    await compare("fixed: frames/client header decode (16 B payload)", [
      { name: "DataView", run: () => dvDecodeClientFrame(frameBytes) },
      { name: "hand-written shifts", run: () => shDecodeClientFrame(frameBytes) },
      { name: "generated", run: () => decodeClientFrame(frameBytes) },
    ], timing),
    await compare("fixed: frames/client header encode (16 B payload)", [
      { name: "DataView", run: () => dvEncodeClientFrame(frame) },
      { name: "hand-written shifts", run: () => shEncodeClientFrame(frame) },
      { name: "generated", run: () => encodeClientFrame(frame) },
    ], timing),
    await compare("fixed: /requests ask header decode", [
      { name: "DataView", run: () => dvDecodeAskHeader(askBytes) },
      { name: "hand-written shifts", run: () => shDecodeAskHeader(askBytes) },
      { name: "generated", run: () => decodeRequestsAsk(askBytes) },
    ], timing),
    await compare("fixed: /requests ask header encode", [
      { name: "DataView", run: () => dvEncodeAskPostgres(ask) },
      { name: "hand-written shifts", run: () => shEncodeAskPostgres(ask) },
      { name: "generated", run: () => encodeRequestsAsk(ask) },
    ], timing),
  ];
}

/** Case 2: JSON frames, generated vs bare JSON + TextDecoder/TextEncoder; checking separately. */
export async function jsonFrames(timing: Timing): Promise<GroupResult[]> {
  const callTool = { variant: "McpCallTool", params: callToolParams } as const;
  const callToolBytes = encodeToolsBeginChannelRequest(callTool);
  const list = { variant: "Result", result: listToolsResult() } as const;
  const listBytes = encodeMcpListToolsAnswer(list);
  const read = { variant: "Result", result: readResourceResult() } as const;
  const readBytes = encodeMcpReadResourceAnswer(read);
  const kb = (n: number) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KB` : `${(n / (1 << 20)).toFixed(2)} MB`);
  return [
    await compare(`json: call-tool params decode (${kb(callToolBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonDecode(callToolBytes) },
      { name: "generated", run: () => decodeToolsBeginChannelRequest(callToolBytes) },
      { name: "generated + checkMcp", run: () => decodeToolsBeginChannelRequest(callToolBytes, checked) },
    ], timing),
    await compare(`json: call-tool params encode (${kb(callToolBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonEncode(callToolParams) },
      { name: "generated", run: () => encodeToolsBeginChannelRequest(callTool) },
    ], timing),
    await compare(`json: list-tools result decode (${kb(listBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonDecode(listBytes) },
      { name: "generated", run: () => decodeMcpListToolsAnswer(listBytes) },
      { name: "generated + checkMcp", run: () => decodeMcpListToolsAnswer(listBytes, checked) },
    ], timing),
    await compare(`json: list-tools result encode (${kb(listBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonEncode(list.result) },
      { name: "generated", run: () => encodeMcpListToolsAnswer(list) },
    ], timing),
    await compare(`json: read-resource result decode (${kb(readBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonDecode(readBytes) },
      { name: "generated", run: () => decodeMcpReadResourceAnswer(readBytes) },
      { name: "generated + checkMcp", run: () => decodeMcpReadResourceAnswer(readBytes, checked) },
    ], timing),
    await compare(`json: read-resource result encode (${kb(readBytes.length)})`, [
      { name: "bare JSON", run: () => bareJsonEncode(read.result) },
      { name: "generated", run: () => encodeMcpReadResourceAnswer(read) },
    ], timing),
  ];
}

/** Case 3: the same frames through protobuf-es. The generated codec is the baseline here. */
export async function protobufPeer(timing: Timing): Promise<GroupResult[]> {
  const postgresBytes = encodePostgresRequest({ connection_id: 0xdead_beef });
  const pbPostgres = { connectionId: 0xdead_beef };
  const pbPostgresBytes = pbEncodePostgres(pbPostgres);
  const frame: ClientFrame = { variant: "ChannelResponse", scope: 7, channel: 0x0102_0304, payload: new Uint8Array(16).fill(0x61) };
  const frameBytes = encodeClientFrame(frame);
  const pbFrame = { type: 5, scope: 7, channel: 0x0102_0304, payload: new Uint8Array(16).fill(0x61) };
  const pbFrameBytes = pbEncodeClientFrame(pbFrame);
  const callTool = { variant: "McpCallTool", params: callToolParams } as const;
  const callToolBytes = encodeToolsBeginChannelRequest(callTool);
  const pbCallToolBytes = pbEncodeCallTool(callToolParams);
  return [
    await compare("protobuf: postgres/request decode", [
      { name: "generated", run: () => decodePostgresRequest(postgresBytes) },
      { name: "protobuf-es", run: () => pbDecodePostgres(pbPostgresBytes) },
    ], timing),
    await compare("protobuf: postgres/request encode", [
      { name: "generated", run: () => encodePostgresRequest({ connection_id: 0xdead_beef }) },
      { name: "protobuf-es", run: () => pbEncodePostgres(pbPostgres) },
    ], timing),
    await compare("protobuf: frame header decode (16 B payload)", [
      { name: "generated", run: () => decodeClientFrame(frameBytes) },
      { name: "protobuf-es", run: () => pbDecodeClientFrame(pbFrameBytes) },
    ], timing),
    await compare("protobuf: frame header encode (16 B payload)", [
      { name: "generated", run: () => encodeClientFrame(frame) },
      { name: "protobuf-es", run: () => pbEncodeClientFrame(pbFrame) },
    ], timing),
    await compare("protobuf: call-tool message decode (JSON params)", [
      { name: "generated", run: () => decodeToolsBeginChannelRequest(callToolBytes) },
      { name: "protobuf-es", run: () => pbDecodeCallTool(pbCallToolBytes) },
    ], timing),
    await compare("protobuf: call-tool message encode (JSON params)", [
      { name: "generated", run: () => encodeToolsBeginChannelRequest(callTool) },
      { name: "protobuf-es", run: () => pbEncodeCallTool(callToolParams) },
    ], timing),
  ];
}
