// Fixed-width big-endian integers and hex, over plain Uint8Array: no DataView or Buffer to allocate,
// so the same code runs in browsers and never allocates per read.
import { EncodeError } from "./errors.js";

export function readU16(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 8) | bytes[at + 1]!;
}

export function readU32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
}

export function writeU16(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value >>> 8;
  bytes[at + 1] = value;
}

export function writeU32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value >>> 24;
  bytes[at + 1] = value >>> 16;
  bytes[at + 2] = value >>> 8;
  bytes[at + 3] = value;
}

const MAX: Record<"u8" | "u16" | "u32", number> = { u8: 0xff, u16: 0xffff, u32: 0xffffffff };

/** Refuses anything that is not a whole number the integer type can hold. */
export function checkInt(frame: string, field: string, type: "u8" | "u16" | "u32", value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MAX[type]) {
    throw new EncodeError(frame, field, `${field} must be a whole number from 0 to ${MAX[type]} (${type})`);
  }
  return value;
}

export function checkBytes(frame: string, field: string, value: unknown): Uint8Array {
  if (!(value instanceof Uint8Array)) throw new EncodeError(frame, field, `${field} must be a Uint8Array`);
  return value;
}

/** A length prefix of two bytes holds at most 65535. */
export function checkU16Length(frame: string, field: string, length: number): number {
  if (length > 0xffff) throw new EncodeError(frame, field, `${field} is ${length} bytes, more than 65535`);
  return length;
}

const HEX = "0123456789abcdef";

export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i]! >> 4]! + HEX[bytes[i]! & 15]!;
  return out;
}

/**
 * Lowercase or uppercase hex, whitespace allowed between bytes. Throws a RangeError on anything else,
 * saying which: a character that is not a hex digit (by its index, not quoted), or an odd count.
 */
export function fromHex(hex: string): Uint8Array {
  const bad = /[^0-9a-fA-F\s]/.exec(hex);
  if (bad) throw new RangeError(`not hex: the character at index ${bad.index} is not a hex digit (0-9, a-f, A-F) or whitespace`);
  const clean = hex.replace(/\s+/g, "");
  if (clean.length % 2 !== 0) throw new RangeError(`not an even number of hex digits: ${clean.length} digits, half a byte left over`);
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** A u64, big-endian, exact, as a bigint. */
export function readU64(bytes: Uint8Array, at: number): bigint {
  return (BigInt(readU32(bytes, at)) << 32n) | BigInt(readU32(bytes, at + 4));
}

export function writeU64(bytes: Uint8Array, at: number, value: bigint): void {
  writeU32(bytes, at, Number(value >> 32n));
  writeU32(bytes, at + 4, Number(value & 0xffffffffn));
}

/** Refuses anything that is not a bigint a u64 can hold. */
export function checkU64(frame: string, field: string, value: unknown): bigint {
  if (typeof value !== "bigint" || value < 0n || value > 0xffffffffffffffffn) {
    throw new EncodeError(frame, field, `${field} must be a bigint from 0 to 18446744073709551615 (u64)`);
  }
  return value;
}
