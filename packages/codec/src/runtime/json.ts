// JSON payloads: read strictly, and when they fail, say where and why without quoting a byte of the
// input. JavaScript's own JSON.parse messages quote the input, which would leak secrets into errors.
//
// The rule for every JSON field the codec reads is serde_json's (the Rust implementation reads them
// into `serde_json::Value`, `String` and maps of `String`):
// - the bytes are UTF-8, strictly;
// - the text is one JSON value and nothing else;
// - every string, object keys included, is Unicode text: a `\u` escape of a lone surrogate
//   (`"\ud800"`, `"\udc00"`, a leading surrogate not followed by a trailing one) is refused;
// - at most 127 arrays and objects nest: serde_json's recursion limit of 128 refuses the 128th;
// - every number is finite as an f64: `1e999` is refused, where JSON.parse would give Infinity.
// A refusal is a `JsonFailure` whose reason is serde_json's own text with its position (line, and
// column in bytes), e.g. `unexpected end of hex escape at line 1 column 22`, never a quote.
import { EncodeError } from "./errors.js";
import { firstInvalidUtf8, readUtf8 } from "./utf8.js";

/** Thrown by `readJson`; generated decoders turn it into the frame's own typed error. */
export class JsonFailure {
  constructor(readonly reason: string) {}
}

/** serde_json's `remaining_depth`: the 128th array or object nested inside the others is refused. */
const RECURSION_LIMIT = 128;

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The text of `bytes[start, end)` as strict UTF-8, or `undefined`. When the JSON runs to the end of
 * the frame and the bytes before it are ASCII (a tag byte, say), the whole frame is decoded and the
 * prefix sliced off: the same text, without allocating a view for the JSON's bytes, which costs more
 * than the decode of a small payload itself (see packages/bench).
 */
function readText(bytes: Uint8Array, start: number, end: number): string | undefined {
  if (end - start <= 32) return readUtf8(bytes, start, end);
  if (end === bytes.length && start <= 8) {
    let ascii = true;
    for (let i = 0; i < start; i++) if (bytes[i]! >= 0x80) ascii = false;
    if (ascii) {
      try {
        const whole = strict.decode(bytes);
        return start === 0 ? whole : whole.slice(start);
      } catch {
        return undefined;
      }
    }
  }
  return readUtf8(bytes, start, end);
}

/**
 * Below this many bytes the JSON can neither nest 128 deep (that takes 128 openers and 128 closers)
 * nor hold a number past an f64 without an exponent (that takes 309 digits), so one pass over its
 * bytes tells whether any of serde_json's refusals is possible at all.
 */
const SHORT = 256;

// What that pass notes of each byte: a digit, an `e`/`E`, a backslash, a byte past ASCII.
const DIGIT = 1;
const EXPONENT = 2; // DIGIT << 1: an `e`/`E` right after a digit
const BACKSLASH = 4;
const NON_ASCII = 8;
const BYTE_CLASS = (() => {
  const table = new Uint8Array(256);
  for (let c = 0x30; c <= 0x39; c++) table[c] = DIGIT;
  table[0x45] = table[0x65] = EXPONENT;
  table[0x5c] = BACKSLASH;
  for (let c = 0x80; c < 256; c++) table[c] = NON_ASCII;
  return table;
})();

type Latin1Slice = (this: Uint8Array, start: number, end: number) => string;

/**
 * Node's `Buffer#latin1Slice` (also the `buffer` package's, in browser bundles), when the host has
 * one that reads a plain `Uint8Array`: for ASCII bytes it builds the same string as strict UTF-8
 * without TextDecoder's validation, which on a 100-byte payload costs more than the check itself.
 */
const latin1Slice: Latin1Slice | undefined = (() => {
  const slice = (globalThis as { Buffer?: { prototype?: { latin1Slice?: unknown } } }).Buffer?.prototype?.latin1Slice;
  if (typeof slice !== "function") return undefined;
  try {
    return (slice as Latin1Slice).call(new Uint8Array([0x7b, 0x7d]), 0, 2) === "{}" ? (slice as Latin1Slice) : undefined;
  } catch {
    return undefined;
  }
})();

/** Parses `bytes[start, end)` as one JSON value. Throws `JsonFailure` with a quote-free reason. */
export function readJson(bytes: Uint8Array, start: number, end: number): unknown {
  if (end - start < SHORT) return readShortJson(bytes, start, end);
  const text = textOf(bytes, start, end);
  const value = parse(text);
  // What JSON.parse accepts and serde_json does not, found cheaply, worded only when found:
  // - a lone surrogate can only be written as a `\u` escape (the bytes are strict UTF-8), so a text
  //   without `\u` has none; with one, the escapes alone are checked;
  // - an overflowing number is ±Infinity and too deep a nesting is a deep value: one walk of the
  //   parsed value finds both, its cost the number of values, not of bytes (a scan of the text cost
  //   more than JSON.parse itself on a 1 MB resource).
  refuseWhatSerdeRefuses(text, value);
  return value;
}

/**
 * `readJson` of fewer than `SHORT` bytes. One pass over the bytes finds whether they are ASCII, hold
 * a backslash (the only way to write a lone surrogate), or a digit followed by `e`/`E` (every
 * exponent, the only way to overflow here). With none of those, JSON.parse's value is serde_json's,
 * and no walk of the value is needed: on a 105-byte `tools/call` the walk and the escape search cost
 * more than the pass.
 */
function readShortJson(bytes: Uint8Array, start: number, end: number): unknown {
  let seen = 0;
  let exponent = 0;
  let previous = 0;
  let i = start;
  // Eight bytes a round: V8 does not unroll the loop itself, and its bounds checks and branch cost
  // more than the table lookups (0.8 ns a byte one at a time, measured on a 105-byte call).
  for (; i + 8 <= end; i += 8) {
    const k0 = BYTE_CLASS[bytes[i]!]!, k1 = BYTE_CLASS[bytes[i + 1]!]!, k2 = BYTE_CLASS[bytes[i + 2]!]!, k3 = BYTE_CLASS[bytes[i + 3]!]!;
    const k4 = BYTE_CLASS[bytes[i + 4]!]!, k5 = BYTE_CLASS[bytes[i + 5]!]!, k6 = BYTE_CLASS[bytes[i + 6]!]!, k7 = BYTE_CLASS[bytes[i + 7]!]!;
    seen |= k0 | k1 | k2 | k3 | k4 | k5 | k6 | k7;
    exponent |= ((previous << 1) & k0) | ((k0 << 1) & k1) | ((k1 << 1) & k2) | ((k2 << 1) & k3);
    exponent |= ((k3 << 1) & k4) | ((k4 << 1) & k5) | ((k5 << 1) & k6) | ((k6 << 1) & k7);
    previous = k7;
  }
  for (; i < end; i++) {
    const kind = BYTE_CLASS[bytes[i]!]!;
    seen |= kind;
    exponent |= (previous << 1) & kind;
    previous = kind;
  }
  const text = (seen & NON_ASCII) === 0 && latin1Slice !== undefined ? latin1Slice.call(bytes, start, end) : textOf(bytes, start, end);
  // JSON.parse inline, not through `parse`: the call is a tenth of the remaining overhead here.
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new JsonFailure(describeJsonError(text));
  }
  if ((seen & BACKSLASH) !== 0 || (exponent & EXPONENT) !== 0) refuseWhatSerdeRefuses(text, value);
  return value;
}

/** The strict UTF-8 text of `bytes[start, end)`, or a `JsonFailure` naming the first bad byte. */
function textOf(bytes: Uint8Array, start: number, end: number): string {
  const text = readText(bytes, start, end);
  if (text !== undefined) return text;
  const at = firstInvalidUtf8(bytes, start, end);
  throw new JsonFailure(`invalid utf-8 at byte ${at < 0 ? 0 : at - start}`);
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new JsonFailure(describeJsonError(text));
  }
}

/**
 * Throws serde_json's complaint, with its position, when JSON.parse accepted `text` as `value` but
 * serde_json would not: a lone surrogate escape, an overflowing number, nesting past its limit.
 */
function refuseWhatSerdeRefuses(text: string, value: unknown): void {
  const suspect = typeof value === "object" ? value !== null && suspicious(value, 1) : value === Infinity || value === -Infinity;
  if (suspect || (text.indexOf("\\u") !== -1 && loneSurrogateEscape(text))) {
    // Only now is the text scanned from its start, for serde_json's first complaint and its position.
    throw new JsonFailure(findJsonProblem(text) ?? "invalid JSON");
  }
}

/** Whether `node` (at nesting `depth`, the outermost being 1) holds ±Infinity or nests too deeply. */
function suspicious(node: object, depth: number): boolean {
  if (depth >= RECURSION_LIMIT) return true;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const item: unknown = node[i];
      if (typeof item === "object") {
        if (item !== null && suspicious(item, depth + 1)) return true;
      } else if (typeof item === "number" && item - item !== 0) return true; // ±Infinity - itself is NaN
    }
  } else {
    for (const key in node) {
      const item: unknown = (node as Record<string, unknown>)[key];
      if (typeof item === "object") {
        if (item !== null && suspicious(item, depth + 1)) return true;
      } else if (typeof item === "number" && item - item !== 0) return true; // ±Infinity - itself is NaN
    }
  }
  return false;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** The four hex digits at `text[at, at + 4)` as a number, or -1. */
function hex4(text: string, at: number): number {
  if (at + 4 > text.length) return -1;
  let n = 0;
  for (let k = 0; k < 4; k++) {
    const d = hexValue(text.charCodeAt(at + k));
    if (d < 0) return -1;
    n = (n << 4) | d;
  }
  return n;
}

/**
 * Whether a `\u` escape in `text`, which JSON.parse accepted, writes a lone surrogate. Every
 * backslash of valid JSON is inside a string, and starts an escape unless the escape before it is
 * `\\`: an odd run of backslashes before it.
 */
function loneSurrogateEscape(text: string): boolean {
  let at = text.indexOf("\\u");
  while (at !== -1) {
    let run = 0;
    while (at - run - 1 >= 0 && text.charCodeAt(at - run - 1) === 0x5c) run++;
    let next = at + 2;
    if (run % 2 === 0) {
      const n = hex4(text, at + 2);
      if (n >= 0xdc00 && n <= 0xdfff) return true;
      if (n >= 0xd800 && n <= 0xdbff) {
        if (text.charCodeAt(at + 6) !== 0x5c || text.charCodeAt(at + 7) !== 0x75) return true;
        const low = hex4(text, at + 8);
        if (low < 0xdc00 || low > 0xdfff) return true;
        next = at + 12;
      } else next = at + 6;
    }
    at = text.indexOf("\\u", next);
  }
  return false;
}

const encoder = new TextEncoder();

function stringify(frame: string, field: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (problem) {
    throw new EncodeError(frame, field, `${field} did not serialize: ${(problem as Error).message}`);
  }
  if (text === undefined) throw new EncodeError(frame, field, `${field} is not a JSON value`);
  return text;
}

/** The compact JSON of `value` as UTF-8. Object keys keep the order they were given in. */
export function encodeJson(frame: string, field: string, value: unknown): Uint8Array {
  return encoder.encode(stringify(frame, field, value));
}

const PADS = ["", " ", "  ", "   ", "    ", "     ", "      ", "       ", "        ", "         "];

/**
 * A whole frame whose last field is JSON to its end: `prefix` bytes for the caller to fill in (the
 * frame's header and fixed fields), then the compact JSON of `value` as UTF-8.
 *
 * One allocation and no copy: the text is encoded after `prefix` ASCII spaces, each exactly one
 * byte, which the caller then overwrites. Encoding the JSON on its own and copying it behind the
 * header costs a second allocation and a copy of every byte, which on small frames is a third of the
 * whole encode and on a megabyte a tenth (see packages/bench).
 */
export function encodeJsonAfter(prefix: number, frame: string, field: string, value: unknown): Uint8Array {
  const text = stringify(frame, field, value);
  return encoder.encode((PADS[prefix] ?? " ".repeat(prefix)) + text);
}

/** `undefined` when `value` is a JSON object whose every member is a string, else why not. */
export function checkStringMap(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return "invalid type: expected an object of string values";
  }
  for (const key in value) {
    if (Object.prototype.hasOwnProperty.call(value, key) && typeof (value as Record<string, unknown>)[key] !== "string") {
      return "invalid type: expected a string value for every member";
    }
  }
  return undefined;
}

/** `undefined` when `value` is a JSON object, else why not. */
export function checkObject(value: unknown): string | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : "invalid type: expected an object";
}

/**
 * Finds the first reason `text` is not JSON as serde_json reads it and words it as serde_json does
 * (`EOF while parsing a value at line 1 column 0`), giving only a position. `invalid JSON` only if
 * there is none (the caller's text was fine after all).
 */
export function describeJsonError(text: string): string {
  return findJsonProblem(text) ?? "invalid JSON";
}

/** UTF-8 bytes of `text[from, to)`: serde_json counts columns in bytes. The text is well-formed. */
function byteLength(text: string, from: number, to: number): number {
  let bytes = 0;
  for (let k = from; k < to; k++) {
    const c = text.charCodeAt(k);
    bytes += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 2 : 3;
  }
  return bytes;
}

const I32_MAX = 2147483647;

/**
 * The first thing in `text` serde_json refuses, worded as serde_json words it, in the order it
 * reads: syntax, lone surrogate escapes, nesting past its recursion limit, numbers that overflow an
 * f64. `undefined` when it would accept the text. Iterative, so deep nesting cannot overflow.
 */
export function findJsonProblem(text: string): string | undefined {
  let i = 0;
  let line = 1;
  let lineStart = 0;
  const n = text.length;
  // `index` is the byte serde_json blames: its column is 1-based, counted in bytes.
  const at = (index: number, what: string) => `${what} at line ${line} column ${byteLength(text, lineStart, index) + 1}`;
  const eof = (what: string) => `EOF while parsing ${what} at line ${line} column ${byteLength(text, lineStart, n)}`;
  const skipSpace = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x0a) {
        line++;
        lineStart = i + 1;
      } else if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return;
      i++;
    }
  };
  // The stack holds what encloses the value being read: "{" or "[".
  const stack: number[] = [];
  const closeOrNext = (): string | undefined => {
    // After a value inside a container: `,` or the container's closer.
    for (;;) {
      if (stack.length === 0) return undefined;
      skipSpace();
      const top = stack[stack.length - 1]!;
      const what = top === 0x7b ? "an object" : "a list";
      if (i >= n) return eof(what);
      const c = text.charCodeAt(i);
      if (c === 0x2c) {
        i++;
        skipSpace();
        if (i >= n) return eof(top === 0x7b ? "an object" : "a value");
        const d = text.charCodeAt(i);
        if ((top === 0x7b && d === 0x7d) || (top === 0x5b && d === 0x5d)) return at(i, "trailing comma");
        if (top === 0x7b) {
          const keyProblem = readKey();
          if (keyProblem) return keyProblem;
        }
        return "";
      }
      if ((top === 0x7b && c === 0x7d) || (top === 0x5b && c === 0x5d)) {
        i++;
        stack.pop();
        continue;
      }
      return at(i, top === 0x7b ? "expected `,` or `}`" : "expected `,` or `]`");
    }
  };
  // serde_json's `decode_hex_escape` at `from`: the code unit, or a problem.
  const escape4 = (from: number): number | string => {
    if (from + 4 > n) return eof("a string");
    let value = 0;
    for (let k = 0; k < 4; k++) {
      const d = hexValue(text.charCodeAt(from + k));
      if (d < 0) return at(from + k, "invalid escape");
      value = (value << 4) | d;
    }
    return value;
  };
  const readString = (): string | undefined => {
    // i is at the opening quote.
    i++;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return undefined;
      }
      if (c < 0x20) return at(i, "control character (\\u0000-\\u001F) found while parsing a string");
      if (c === 0x5c) {
        i++;
        if (i >= n) return eof("a string");
        const e = text.charCodeAt(i);
        if (e === 0x75) {
          // \uXXXX: a trailing surrogate alone, or a leading one without its trailing `\uXXXX`, is not
          // Unicode text; serde_json blames the byte where it found out.
          const first = escape4(i + 1);
          if (typeof first === "string") return first;
          if (first >= 0xdc00 && first <= 0xdfff) return at(i + 4, "lone leading surrogate in hex escape");
          i += 5;
          if (first >= 0xd800 && first <= 0xdbff) {
            if (i >= n) return eof("a string");
            if (text.charCodeAt(i) !== 0x5c) return at(i, "unexpected end of hex escape");
            if (i + 1 >= n) return eof("a string");
            if (text.charCodeAt(i + 1) !== 0x75) return at(i + 1, "unexpected end of hex escape");
            const second = escape4(i + 2);
            if (typeof second === "string") return second;
            if (second < 0xdc00 || second > 0xdfff) return at(i + 5, "lone leading surrogate in hex escape");
            i += 6;
          }
          continue;
        }
        if (e !== 0x22 && e !== 0x5c && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) {
          return at(i, "invalid escape");
        }
      }
      i++;
    }
    return eof("a string");
  };
  const readKey = (): string | undefined => {
    skipSpace();
    if (i >= n) return eof("an object");
    if (text.charCodeAt(i) !== 0x22) return at(i, "key must be a string");
    const problem = readString();
    if (problem) return problem;
    skipSpace();
    if (i >= n) return eof("an object");
    if (text.charCodeAt(i) !== 0x3a) return at(i, "expected `:`");
    i++;
    return undefined;
  };
  const isDigit = (index: number) => {
    const c = text.charCodeAt(index);
    return c >= 0x30 && c <= 0x39;
  };
  // A number, as serde_json's parse_integer / parse_decimal / parse_exponent read it.
  const readNumber = (): string | undefined => {
    const begin = i;
    if (text.charCodeAt(i) === 0x2d) {
      i++;
      if (i >= n) return eof("a value");
    }
    if (text.charCodeAt(i) === 0x30) {
      i++;
      if (i < n && isDigit(i)) return at(i, "invalid number");
    } else if (isDigit(i)) {
      while (i < n && isDigit(i)) i++;
    } else return at(i, "invalid number");
    if (i < n && text.charCodeAt(i) === 0x2e) {
      i++;
      if (i >= n) return eof("a value");
      if (!isDigit(i)) return at(i, "invalid number");
      while (i < n && isDigit(i)) i++;
    }
    let exponentOverflow = -1;
    if (i < n && (text.charCodeAt(i) | 0x20) === 0x65) {
      i++;
      const sign = text.charCodeAt(i);
      const positive = sign !== 0x2d;
      if (sign === 0x2b || sign === 0x2d) i++;
      if (i >= n) return eof("a value");
      if (!isDigit(i)) return at(i, "invalid number");
      let exp = 0;
      while (i < n && isDigit(i)) {
        const digit = text.charCodeAt(i) - 0x30;
        if (exponentOverflow < 0 && positive && (exp > (I32_MAX - digit) / 10)) exponentOverflow = i;
        if (exponentOverflow < 0) exp = exp * 10 + digit;
        i++;
      }
    }
    const value = Number(text.slice(begin, i));
    if (value === Infinity || value === -Infinity) {
      // Past i32 the exponent is refused at the digit that overflowed it; else once read whole.
      return at(exponentOverflow >= 0 ? exponentOverflow : i - 1, "number out of range");
    }
    return undefined;
  };
  for (;;) {
    // Read one value.
    skipSpace();
    if (i >= n) return eof("a value");
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) {
      if (stack.length + 1 >= RECURSION_LIMIT) return at(i, "recursion limit exceeded");
      i++;
      skipSpace();
      if (i >= n) return eof(c === 0x7b ? "an object" : "a list");
      const d = text.charCodeAt(i);
      if ((c === 0x7b && d === 0x7d) || (c === 0x5b && d === 0x5d)) {
        i++;
      } else {
        stack.push(c);
        if (c === 0x7b) {
          const problem = readKey();
          if (problem) return problem;
        }
        continue;
      }
    } else if (c === 0x22) {
      const problem = readString();
      if (problem) return problem;
    } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
      const word = c === 0x74 ? "true" : c === 0x66 ? "false" : "null";
      for (let k = 1; k < word.length; k++) {
        if (i + k >= n) return eof("a value");
        if (text[i + k] !== word[k]) return at(i + k, "expected ident");
      }
      i += word.length;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const problem = readNumber();
      if (problem) return problem;
    } else {
      return at(i, "expected value");
    }
    const after = closeOrNext();
    if (after === "") continue;
    if (after !== undefined) return after;
    skipSpace();
    if (i < n) return at(i, "trailing characters");
    return undefined;
  }
}
