// UTF-8 in both directions. Decoding is strict: invalid bytes are a typed decode error, never U+FFFD.
import { EncodeError } from "./errors.js";

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/** The text of `bytes[start, end)`, or `undefined` when those bytes are not UTF-8. */
export function readUtf8(bytes: Uint8Array, start: number, end: number): string | undefined {
  if (start === end) return "";
  // Short ASCII runs are cheaper to build in JavaScript than through TextDecoder.
  if (end - start <= 32) {
    let text = "";
    for (let i = start; i < end; i++) {
      const b = bytes[i]!;
      if (b >= 0x80) return decodeStrict(bytes, start, end);
      text += String.fromCharCode(b);
    }
    return text;
  }
  return decodeStrict(bytes, start, end);
}

function decodeStrict(bytes: Uint8Array, start: number, end: number): string | undefined {
  try {
    return strict.decode(bytes.subarray(start, end));
  } catch {
    return undefined;
  }
}

export function encodeUtf8(frame: string, field: string, value: unknown): Uint8Array {
  if (typeof value !== "string") throw new EncodeError(frame, field, `${field} must be a string`);
  return encoder.encode(value);
}

/** The offset of the first byte that breaks UTF-8 in `bytes[start, end)`, or -1. Used only to word errors. */
export function firstInvalidUtf8(bytes: Uint8Array, start: number, end: number): number {
  let i = start;
  while (i < end) {
    const b = bytes[i]!;
    let need: number;
    let min: number;
    if (b < 0x80) {
      i++;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) (need = 1), (min = 0x80);
    else if (b >= 0xe0 && b <= 0xef) (need = 2), (min = 0x800);
    else if (b >= 0xf0 && b <= 0xf4) (need = 3), (min = 0x10000);
    else return i;
    if (i + need >= end) return i;
    let cp = b & (0x3f >> need);
    for (let k = 1; k <= need; k++) {
      const c = bytes[i + k]!;
      if ((c & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += need + 1;
  }
  return -1;
}
