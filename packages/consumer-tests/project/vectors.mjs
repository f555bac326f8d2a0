// Decodes and encodes the conformance vectors through the installed @diverge/codec. The same module
// runs under Node (node-vectors.mjs) and, bundled by esbuild, in the browser (browser-entry.mjs).
// The frame id → codec function map comes from @diverge/conformance; every function it names must
// be the very one @diverge/codec exports (one copy of the codec in the install).
import * as codec from "@diverge/codec";
import { DecodeError, EncodeError, fromHex, toHex } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { fromView, registry, toView } from "@diverge/conformance";

const exported = new Set(Object.values(codec));

function reply(input) {
  const entry = registry[input.revision]?.[input.frame];
  if (!entry) return { error: { variant: "UnknownFrame", message: `no frame ${input.frame}` } };
  if (!exported.has(entry.decode) || !exported.has(entry.encode)) {
    throw new Error(`${input.frame}: the conformance registry's functions are not @diverge/codec's own`);
  }
  if (typeof input.decode === "string") {
    try {
      return { value: toView(entry, entry.decode(fromHex(input.decode), { check: checkMcp })) };
    } catch (error) {
      if (error instanceof entry.error && error instanceof DecodeError) return { error: { variant: error.variant, message: error.message } };
      throw error;
    }
  }
  let value;
  try {
    value = fromView(entry, input.encode);
  } catch (error) {
    return { error: { variant: "InvalidValue", message: error.message } };
  }
  try {
    return { hex: toHex(entry.encode(value)) };
  } catch (error) {
    if (error instanceof EncodeError) return { error: { variant: "InvalidValue", message: error.message } };
    throw error;
  }
}

function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
}

/** Why `got` does not meet `expect`, or undefined when it does (the rules of vectors.test.ts). */
function mismatch(expect, got) {
  if (expect.error) {
    if (!got.error) return `expected error ${expect.error.variant}, got ${JSON.stringify(got)}`;
    if (got.error.variant !== expect.error.variant) return `expected variant ${expect.error.variant}, got ${got.error.variant}`;
    if (expect.error.message !== undefined && got.error.message !== expect.error.message) return `message ${JSON.stringify(got.error.message)}`;
    if (expect.error.messagePrefix !== undefined && !got.error.message.startsWith(expect.error.messagePrefix)) return `message ${JSON.stringify(got.error.message)}`;
    return undefined;
  }
  if (expect.hex !== undefined) return equal(got, { hex: expect.hex }) ? undefined : `expected hex ${expect.hex}, got ${JSON.stringify(got)}`;
  return equal(got, { value: expect.value }) ? undefined : `expected ${JSON.stringify(expect.value)}, got ${JSON.stringify(got)}`;
}

/** Runs every vector; never throws for one vector's failure, so the report names each. */
export function runVectors(vectors) {
  const failures = [];
  let decoded = 0;
  let encoded = 0;
  for (const vector of vectors) {
    let problem;
    try {
      problem = mismatch(vector.expect, reply(vector.input));
    } catch (error) {
      problem = `threw ${error?.stack ?? error}`;
    }
    if (problem) failures.push({ name: vector.name, problem });
    else if (typeof vector.input.decode === "string") decoded++;
    else encoded++;
  }
  return { total: vectors.length, passed: vectors.length - failures.length, decoded, encoded, failed: failures.length, failures };
}

/** Parses a .jsonl file's text. */
export function parseVectors(text) {
  return text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line));
}
