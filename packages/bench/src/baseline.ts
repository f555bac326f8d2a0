// The hand-written minimal versions of the same bytes: what a person would write with a DataView and
// no validation beyond what keeps the read in bounds. They are the practical limit the generated
// codec is measured against (case 1), and they read and write exactly the bytes the codec does
// (checked in test/baseline.test.ts).

// ---- postgres/request: [connection_id u32 BE]

export function dvEncodePostgres(value: { connection_id: number }): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value.connection_id);
  return out;
}

export function dvDecodePostgres(bytes: Uint8Array): { connection_id: number } {
  if (bytes.length !== 4) throw new RangeError("postgres request is not 4 bytes");
  return { connection_id: new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0) };
}

// ---- frames/client: [type u8][scope u32 BE][channel u32 BE][payload …]

const CLIENT_TYPES = ["Authorization", "Request", undefined, undefined, "ChannelRequest", "ChannelResponse", "ChannelResponseFinish"] as const;
const CLIENT_TAGS: Record<string, number> = { Authorization: 0, Request: 1, ChannelRequest: 4, ChannelResponse: 5, ChannelResponseFinish: 6 };

export interface DvClientFrame {
  variant: string;
  scope: number;
  channel: number;
  payload?: Uint8Array;
}

export function dvEncodeClientFrame(value: DvClientFrame): Uint8Array {
  const payload = value.payload;
  const out = new Uint8Array(9 + (payload ? payload.length : 0));
  const view = new DataView(out.buffer);
  view.setUint8(0, CLIENT_TAGS[value.variant]!);
  view.setUint32(1, value.scope);
  view.setUint32(5, value.channel);
  if (payload) out.set(payload, 9);
  return out;
}

export function dvDecodeClientFrame(bytes: Uint8Array): DvClientFrame {
  if (bytes.length < 9) throw new RangeError("frame is shorter than its header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const type = CLIENT_TYPES[view.getUint8(0)];
  if (type === undefined) throw new RangeError("unknown frame type");
  const scope = view.getUint32(1);
  const channel = view.getUint32(5);
  if (type === "ChannelResponseFinish") return { variant: type, scope, channel };
  return { variant: type, scope, channel, payload: bytes.subarray(9) };
}

// ---- proxy/requests/ask, the fixed kind: [channel u32 BE][kind u8] (Postgres = 11, no payload)

export function dvEncodeAskPostgres(value: { channel: number }): Uint8Array {
  const out = new Uint8Array(5);
  const view = new DataView(out.buffer);
  view.setUint32(0, value.channel);
  view.setUint8(4, 11);
  return out;
}

export function dvDecodeAskHeader(bytes: Uint8Array): { variant: string; channel: number } {
  if (bytes.length < 5) throw new RangeError("ask is shorter than its header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const channel = view.getUint32(0);
  if (view.getUint8(4) !== 11) throw new RangeError("not a postgres ask");
  return { variant: "Postgres", channel };
}

// ---- The same three frames with shifts on the bytes instead of a DataView: the other way a person
// writes this by hand. Whichever of the two hand-written versions is faster is the limit.

export function shEncodePostgres(value: { connection_id: number }): Uint8Array {
  const out = new Uint8Array(4);
  const v = value.connection_id;
  out[0] = v >>> 24;
  out[1] = v >>> 16;
  out[2] = v >>> 8;
  out[3] = v;
  return out;
}

export function shDecodePostgres(bytes: Uint8Array): { connection_id: number } {
  if (bytes.length !== 4) throw new RangeError("postgres request is not 4 bytes");
  return { connection_id: ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0 };
}

export function shEncodeClientFrame(value: DvClientFrame): Uint8Array {
  const payload = value.payload;
  const out = new Uint8Array(9 + (payload ? payload.length : 0));
  const s = value.scope;
  const c = value.channel;
  out[0] = CLIENT_TAGS[value.variant]!;
  out[1] = s >>> 24;
  out[2] = s >>> 16;
  out[3] = s >>> 8;
  out[4] = s;
  out[5] = c >>> 24;
  out[6] = c >>> 16;
  out[7] = c >>> 8;
  out[8] = c;
  if (payload) out.set(payload, 9);
  return out;
}

export function shDecodeClientFrame(bytes: Uint8Array): DvClientFrame {
  if (bytes.length < 9) throw new RangeError("frame is shorter than its header");
  const type = CLIENT_TYPES[bytes[0]!];
  if (type === undefined) throw new RangeError("unknown frame type");
  const scope = ((bytes[1]! << 24) | (bytes[2]! << 16) | (bytes[3]! << 8) | bytes[4]!) >>> 0;
  const channel = ((bytes[5]! << 24) | (bytes[6]! << 16) | (bytes[7]! << 8) | bytes[8]!) >>> 0;
  if (type === "ChannelResponseFinish") return { variant: type, scope, channel };
  return { variant: type, scope, channel, payload: bytes.subarray(9) };
}

export function shEncodeAskPostgres(value: { channel: number }): Uint8Array {
  const out = new Uint8Array(5);
  const c = value.channel;
  out[0] = c >>> 24;
  out[1] = c >>> 16;
  out[2] = c >>> 8;
  out[3] = c;
  out[4] = 11;
  return out;
}

export function shDecodeAskHeader(bytes: Uint8Array): { variant: string; channel: number } {
  if (bytes.length < 5) throw new RangeError("ask is shorter than its header");
  const channel = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  if (bytes[4] !== 11) throw new RangeError("not a postgres ask");
  return { variant: "Postgres", channel };
}

// ---- JSON frames (case 2): the bare way, [tag u8][JSON …]

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** `JSON.parse(new TextDecoder().decode(bytes.subarray(1)))`, with the decoder made once. */
export function bareJsonDecode(bytes: Uint8Array): unknown {
  return JSON.parse(decoder.decode(bytes.subarray(1)));
}

/** `JSON.stringify` + `TextEncoder`, and nothing else: not even the tag byte. */
export function bareJsonEncode(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}
