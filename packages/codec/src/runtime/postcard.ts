// Postcard (the Rust `postcard` crate, 1.x) in both directions, generic: unsigned LEB128 varints,
// bools, options, length-prefixed strings and byte strings, sequence counts and enum indexes.
// Generated modules read and write each postcard type with these; nothing here names a type.
//
// Reading fails with a `PostcardFailure` whose `variant` is the postcard error a Rust reader would
// meet at the same byte (DeserializeUnexpectedEnd, …); the generated decoder turns it into the
// frame's own typed error with the spec's text.
import { EncodeError } from "./errors.js";
import { readUtf8 } from "./utf8.js";

/** Why postcard bytes could not be read; the generated decoder maps it to the frame's error type. */
export class PostcardFailure {
  constructor(
    readonly variant:
      | "DeserializeUnexpectedEnd"
      | "DeserializeBadVarint"
      | "DeserializeBadBool"
      | "DeserializeBadUtf8"
      | "DeserializeBadOption"
      | "UnknownVariant"
      | "TooDeep",
    /** For UnknownVariant: the index read and how many variants the enum has. For TooDeep: the limit. */
    readonly index = 0,
    readonly count = 0,
  ) {}
}

/**
 * How deep values may nest (a directory in a directory …). Postcard itself has no limit (a Rust
 * reader overflows its stack first); this one keeps a hostile input from overflowing ours. A path of
 * PATH_MAX (4096) bytes has at most 2048 components, so no real tree comes near it.
 */
export const POSTCARD_MAX_DEPTH = 2048;

const TWO_64 = 1n << 64n;

/** A cursor over postcard bytes. `at` moves as values are read. */
export class PostcardReader {
  at: number;
  depth = 0;
  constructor(
    readonly bytes: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.at = start;
  }

  private byte(): number {
    if (this.at >= this.end) throw new PostcardFailure("DeserializeUnexpectedEnd");
    return this.bytes[this.at++]!;
  }

  /** An unsigned varint of at most `max` bytes whose last byte is at most `last`, as a number (exact below 2^53). */
  private varint(max: number, last: number): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < max; i++) {
      const b = this.byte();
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (i === max - 1 && b > last) throw new PostcardFailure("DeserializeBadVarint");
        return value;
      }
      scale *= 128;
    }
    throw new PostcardFailure("DeserializeBadVarint");
  }

  u8(): number {
    return this.byte();
  }
  u16(): number {
    return this.varint(3, 0x03);
  }
  u32(): number {
    return this.varint(5, 0x0f);
  }
  /** A u64, exact, as a bigint. */
  u64(): bigint {
    const start = this.at;
    // Up to seven bytes hold 49 bits: exact as a number.
    for (let i = 0; i < 7; i++) {
      const b = this.byte();
      if ((b & 0x80) === 0) {
        this.at = start;
        return BigInt(this.varint(7, 0x7f));
      }
    }
    this.at = start;
    let value = 0n;
    for (let i = 0; i < 10; i++) {
      const b = this.byte();
      value |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) {
        if (i === 9 && b > 0x01) throw new PostcardFailure("DeserializeBadVarint");
        return value;
      }
    }
    throw new PostcardFailure("DeserializeBadVarint");
  }
  /** A length or count (a usize of a 64-bit peer). Beyond 2^53 it is inexact, but then larger than any input. */
  usize(): number {
    return this.varint(10, 0x01);
  }
  bool(): boolean {
    const b = this.byte();
    if (b > 1) throw new PostcardFailure("DeserializeBadBool");
    return b === 1;
  }
  /** An option's tag: true when a value follows. */
  some(): boolean {
    const b = this.byte();
    if (b > 1) throw new PostcardFailure("DeserializeBadOption");
    return b === 1;
  }
  string(): string {
    const length = this.usize();
    if (length > this.end - this.at) throw new PostcardFailure("DeserializeUnexpectedEnd");
    const text = readUtf8(this.bytes, this.at, this.at + length);
    if (text === undefined) throw new PostcardFailure("DeserializeBadUtf8");
    this.at += length;
    return text;
  }
  /** A byte string, as a view into the input (no copy). */
  byteString(): Uint8Array {
    const length = this.usize();
    if (length > this.end - this.at) throw new PostcardFailure("DeserializeUnexpectedEnd");
    const out = this.bytes.subarray(this.at, this.at + length);
    this.at += length;
    return out;
  }
  /** A sequence: its count, then each element as `read` reads it. */
  seq<T>(read: (reader: PostcardReader) => T): T[] {
    const count = this.usize();
    const out: T[] = [];
    // Every element takes at least one byte (the compiler refuses field-less structs), so a count
    // larger than the input ends in DeserializeUnexpectedEnd after at most that many elements.
    for (let i = 0; i < count; i++) out.push(read(this));
    return out;
  }
  /** An enum's variant index, refused when the enum has no such variant. */
  variant(count: number): number {
    const index = this.u32();
    if (index >= count) throw new PostcardFailure("UnknownVariant", index, count);
    return index;
  }
  /** Enter a nested value; `leave` when done. */
  enter(): void {
    if (++this.depth > POSTCARD_MAX_DEPTH) throw new PostcardFailure("TooDeep", POSTCARD_MAX_DEPTH);
  }
  leave(): void {
    this.depth--;
  }
}

const encoder = new TextEncoder();

/** The UTF-8 length of `text` as TextEncoder writes it (a lone surrogate as U+FFFD, 3 bytes). */
function utf8Length(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) length += 1;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      length += 2; // A pair: 4 bytes for 2 units.
      i++;
    } else length += 2;
  }
  return length;
}

/** Past this many bytes the writer stops doubling its buffer and starts a new chunk instead. */
const CHUNK = 64 * 1024;

/**
 * A growing buffer postcard values are written into. It doubles up to 64 KiB, then keeps full chunks
 * in a list and starts a new one (of at least 64 KiB), never copying what is written, so a
 * multi-megabyte value holds about its own size plus one chunk until {@link finish} copies it once.
 */
export class PostcardWriter {
  private buffer = new Uint8Array(64);
  private length = 0;
  /** Full chunks before `buffer`, and their bytes. */
  private chunks: Uint8Array[] = [];
  private before = 0;
  constructor(readonly frame: string) {}

  /** The bytes written so far. */
  get byteLength(): number {
    return this.before + this.length;
  }

  private room(n: number): void {
    if (this.length + n <= this.buffer.length) return;
    if (this.length + n <= CHUNK) {
      let size = this.buffer.length * 2;
      while (size < this.length + n) size *= 2;
      const next = new Uint8Array(size);
      next.set(this.buffer.subarray(0, this.length));
      this.buffer = next;
      return;
    }
    this.chunks.push(this.buffer.subarray(0, this.length));
    this.before += this.length;
    this.buffer = new Uint8Array(Math.max(CHUNK, n));
    this.length = 0;
  }

  /**
   * Everything written, as the chunks it is held in (views, no copy; empty ones left out): for a
   * sender that can send a message in pieces, so a large value is never copied into one buffer.
   */
  parts(): Uint8Array[] {
    const out = this.chunks.filter((chunk) => chunk.length > 0);
    if (this.length > 0) out.push(this.buffer.subarray(0, this.length));
    return out;
  }

  /** Everything written, after `prefix` bytes left for the caller to fill. */
  finish(prefix = 0): Uint8Array {
    const out = new Uint8Array(prefix + this.before + this.length);
    let at = prefix;
    for (const chunk of this.chunks) {
      out.set(chunk, at);
      at += chunk.length;
    }
    out.set(this.buffer.subarray(0, this.length), at);
    return out;
  }

  private varint(value: number): void {
    this.room(10);
    while (value >= 0x80) {
      this.buffer[this.length++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    this.buffer[this.length++] = value;
  }

  u8(field: string, value: unknown): void {
    this.room(1);
    this.buffer[this.length++] = this.int(field, value, 0xff);
  }
  u16(field: string, value: unknown): void {
    this.varint(this.int(field, value, 0xffff));
  }
  u32(field: string, value: unknown): void {
    this.varint(this.int(field, value, 0xffffffff));
  }
  u64(field: string, value: unknown): void {
    if (typeof value !== "bigint" || value < 0n || value >= TWO_64) {
      throw new EncodeError(this.frame, field, `${field} must be a bigint from 0 to 18446744073709551615 (u64)`);
    }
    if (value <= 0xffffffffffffn) return this.varint(Number(value));
    this.room(10);
    let v = value;
    while (v >= 0x80n) {
      this.buffer[this.length++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buffer[this.length++] = Number(v);
  }
  usize(value: number): void {
    this.varint(value);
  }
  bool(field: string, value: unknown): void {
    if (typeof value !== "boolean") throw new EncodeError(this.frame, field, `${field} must be a boolean`);
    this.room(1);
    this.buffer[this.length++] = value ? 1 : 0;
  }
  /** An option's tag; returns whether a value follows. */
  some(value: unknown): boolean {
    this.room(1);
    const present = value !== null && value !== undefined;
    this.buffer[this.length++] = present ? 1 : 0;
    return present;
  }
  string(field: string, value: unknown): void {
    if (typeof value !== "string") throw new EncodeError(this.frame, field, `${field} must be a string`);
    // Written in place, never through a temporary array: a tree of 100,000 names wrote 100,000 of them.
    const length = utf8Length(value);
    this.usize(length);
    this.room(length);
    if (length === value.length) {
      for (let i = 0; i < length; i++) this.buffer[this.length + i] = value.charCodeAt(i);
    } else {
      encoder.encodeInto(value, this.buffer.subarray(this.length, this.length + length));
    }
    this.length += length;
  }
  byteString(field: string, value: unknown): void {
    if (!(value instanceof Uint8Array)) throw new EncodeError(this.frame, field, `${field} must be a Uint8Array`);
    this.usize(value.length);
    this.raw(value);
  }
  /** A sequence's count; returns the elements to write. */
  sequence<T>(field: string, value: unknown): readonly T[] {
    if (!Array.isArray(value)) throw new EncodeError(this.frame, field, `${field} must be an array`);
    this.usize(value.length);
    return value as T[];
  }
  /** A sequence's count the caller states, before writing exactly that many elements itself. */
  count(field: string, value: unknown): void {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
      throw new EncodeError(this.frame, field, `${field} count must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`);
    }
    this.varint(value);
  }
  variant(index: number): void {
    this.varint(index);
  }
  private raw(bytes: Uint8Array): void {
    let rest = bytes;
    const free = this.buffer.length - this.length;
    if (bytes.length > free && this.length + bytes.length > CHUNK) {
      // Fill the current buffer first, so no chunk is kept mostly empty.
      this.buffer.set(bytes.subarray(0, free), this.length);
      this.length += free;
      rest = bytes.subarray(free);
    }
    this.room(rest.length);
    this.buffer.set(rest, this.length);
    this.length += rest.length;
  }
  private int(field: string, value: unknown, max: number): number {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > max) {
      throw new EncodeError(this.frame, field, `${field} must be a whole number from 0 to ${max}`);
    }
    return value;
  }
}
