// JSON payloads: read strictly, and when they fail, say where and why without quoting a byte of the
// input. JavaScript's own JSON.parse messages quote the input, which would leak secrets into errors.
import { EncodeError } from "./errors.js";
import { firstInvalidUtf8, readUtf8 } from "./utf8.js";

/** Thrown by `readJson`; generated decoders turn it into the frame's own typed error. */
export class JsonFailure {
  constructor(readonly reason: string) {}
}

/** Parses `bytes[start, end)` as one JSON value. Throws `JsonFailure` with a quote-free reason. */
export function readJson(bytes: Uint8Array, start: number, end: number): unknown {
  const text = readUtf8(bytes, start, end);
  if (text === undefined) {
    const at = firstInvalidUtf8(bytes, start, end);
    throw new JsonFailure(`invalid utf-8 at byte ${at < 0 ? 0 : at - start}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new JsonFailure(describeJsonError(text));
  }
  // JSON.parse reads 1e999 as Infinity, which no JSON can carry back; refuse it as serde_json does.
  // Look for it in the parsed value, whose size is its number of values, not in the text, whose size
  // is its bytes: a regular expression over the text cost more than JSON.parse itself on a 1 MB
  // resource (packages/bench). Only when a value overflowed is the text searched for where.
  if (hasInfinity(value)) throw new JsonFailure(findOutOfRangeNumber(text) ?? "number out of range");
  return value;
}

/** Whether a number in `value` is ±Infinity, the only way JSON.parse reports an overflowing number. */
function hasInfinity(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return value === Infinity || value === -Infinity;
  return infinityIn(value, 0);
}

/** Recursive while shallow (cheaper for the small payloads most frames carry), iterative below that: any depth. */
function infinityIn(node: object, depth: number): boolean {
  if (depth > 256) return infinityInDeep(node);
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const item: unknown = node[i];
      if (typeof item === "object") {
        if (item !== null && infinityIn(item, depth + 1)) return true;
      } else if (item === Infinity || item === -Infinity) return true;
    }
  } else {
    for (const key in node) {
      const item: unknown = (node as Record<string, unknown>)[key];
      if (typeof item === "object") {
        if (item !== null && infinityIn(item, depth + 1)) return true;
      } else if (item === Infinity || item === -Infinity) return true;
    }
  }
  return false;
}

function infinityInDeep(value: object): boolean {
  const stack: object[] = [value];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const items: readonly unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (typeof item === "object") {
        if (item !== null) stack.push(item);
      } else if (item === Infinity || item === -Infinity) return true;
    }
  }
  return false;
}

/** `number out of range at line L column C` for the first number outside strings that overflows. */
function findOutOfRangeNumber(text: string): string | undefined {
  let line = 1;
  let lineStart = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x0a) {
      line++;
      lineStart = i + 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const token = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i))![0];
      if (!Number.isFinite(Number(token))) return `number out of range at line ${line} column ${i - lineStart + token.length}`;
      i += token.length - 1;
    }
  }
  return undefined;
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
 * Finds the first reason `text` is not JSON and words it as serde_json does (`EOF while parsing a
 * value at line 1 column 0`), giving only a position. Iterative, so deep nesting cannot overflow.
 */
export function describeJsonError(text: string): string {
  let i = 0;
  let line = 1;
  let lineStart = 0;
  const n = text.length;
  const at = (index: number, what: string) => `${what} at line ${line} column ${index - lineStart + 1}`;
  const eof = (what: string) => `EOF while parsing ${what} at line ${line} column ${n - lineStart}`;
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
        const e = text[i]!;
        if (e === "u") {
          for (let k = 1; k <= 4; k++) {
            if (i + k >= n) return eof("a string");
            if (!/[0-9a-fA-F]/.test(text[i + k]!)) return at(i + k, "invalid escape");
          }
          i += 5;
          continue;
        }
        if (!'"\\/bfnrt'.includes(e)) return at(i, "invalid escape");
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
  for (;;) {
    // Read one value.
    skipSpace();
    if (i >= n) return eof("a value");
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) {
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
      const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
      if (!match || match[0] === "-") return i + 1 >= n ? eof("a value") : at(i + 1, "invalid number");
      i += match[0].length;
      const next = text[i];
      if (next === "." || next === "e" || next === "E") return i + 1 >= n ? eof("a value") : at(i + 1, "invalid number");
    } else {
      return at(i, "expected value");
    }
    const after = closeOrNext();
    if (after === "") continue;
    if (after !== undefined) return after;
    skipSpace();
    if (i < n) return at(i, "trailing characters");
    return "invalid JSON";
  }
}
