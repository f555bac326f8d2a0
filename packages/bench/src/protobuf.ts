// The peer a user could pick instead (case 3): @bufbuild/protobuf (protobuf-es v2).
//
// How the schema was built, so the comparison can be judged: protobuf-es v2's generated code is a
// serialized FileDescriptorProto (`fileDesc("…")`) plus `messageDesc(file, i)`; encoding and
// decoding then go through the library's one reflective runtime (`toBinary` / `fromBinary`). This
// file writes the same FileDescriptorProto by hand, turns it into descriptors with the library's own
// `createFileRegistry`, and calls the same `toBinary` / `fromBinary`. No protoc and no plugin are
// involved; the code path at run time is the one generated code takes. The schema, as .proto:
//
//   syntax = "proto3";
//   package diverge.bench;
//   message PostgresRequest { fixed32 connection_id = 1; }
//   message ClientFrame { uint32 type = 1; fixed32 scope = 2; fixed32 channel = 3; bytes payload = 4; }
//   message CallTool { string params_json = 1; }
//
// `fixed32` is the closest protobuf has to the spec's four-byte integers (it is little-endian, and
// carries a one-byte field key before it). CallTool carries the params as JSON text, as the
// Diverge frame does, and the benchmark parses it with JSON.parse after `fromBinary`.
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

const { FIXED32: TYPE_FIXED32, UINT32: TYPE_UINT32, BYTES: TYPE_BYTES, STRING: TYPE_STRING } = FieldDescriptorProto_Type;
const OPTIONAL = FieldDescriptorProto_Label.OPTIONAL;

const field = (name: string, number: number, type: FieldDescriptorProto_Type) => ({
  name,
  number,
  type,
  label: OPTIONAL,
  jsonName: name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
});

const file = create(FileDescriptorProtoSchema, {
  name: "diverge/bench.proto",
  package: "diverge.bench",
  syntax: "proto3",
  messageType: [
    { name: "PostgresRequest", field: [field("connection_id", 1, TYPE_FIXED32)] },
    {
      name: "ClientFrame",
      field: [field("type", 1, TYPE_UINT32), field("scope", 2, TYPE_FIXED32), field("channel", 3, TYPE_FIXED32), field("payload", 4, TYPE_BYTES)],
    },
    { name: "CallTool", field: [field("params_json", 1, TYPE_STRING)] },
  ],
});

const registry = createFileRegistry(file, () => undefined);

function message(name: string): DescMessage {
  const desc = registry.getMessage(`diverge.bench.${name}`);
  if (!desc) throw new Error(`protobuf schema has no ${name}`);
  return desc;
}

export const PostgresRequestSchema = message("PostgresRequest");
export const ClientFrameSchema = message("ClientFrame");
export const CallToolSchema = message("CallTool");

// The shapes are those of generated code: plain objects with the fields in camelCase.
export interface PbPostgresRequest {
  connectionId: number;
}
export interface PbClientFrame {
  type: number;
  scope: number;
  channel: number;
  payload: Uint8Array;
}

export function pbEncodePostgres(value: PbPostgresRequest): Uint8Array {
  return toBinary(PostgresRequestSchema, create(PostgresRequestSchema, value as never));
}
export function pbDecodePostgres(bytes: Uint8Array): PbPostgresRequest {
  return fromBinary(PostgresRequestSchema, bytes) as unknown as PbPostgresRequest;
}
export function pbEncodeClientFrame(value: PbClientFrame): Uint8Array {
  return toBinary(ClientFrameSchema, create(ClientFrameSchema, value as never));
}
export function pbDecodeClientFrame(bytes: Uint8Array): PbClientFrame {
  return fromBinary(ClientFrameSchema, bytes) as unknown as PbClientFrame;
}
export function pbEncodeCallTool(params: unknown): Uint8Array {
  return toBinary(CallToolSchema, create(CallToolSchema, { paramsJson: JSON.stringify(params) } as never));
}
export function pbDecodeCallTool(bytes: Uint8Array): unknown {
  const message = fromBinary(CallToolSchema, bytes) as unknown as { paramsJson: string };
  return JSON.parse(message.paramsJson);
}
