// The conformance protocol: one JSON line in, exactly one JSON line out, in order.
//   {"revision","frame","decode":"<hex>"}  → {"value":<view>} | {"error":{"variant","message"}}
//   {"revision","frame","encode":<view>}   → {"hex":"<hex>"}   | {"error":{"variant","message"}}
import { EncodeError, fromHex, toHex } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import type { FrameEntry } from "./entry.js";
import { registry } from "./gen/registry.js";
import { postcardFromView, postcardToView } from "./postcard-view.js";

type Reply = { value: unknown } | { hex: string } | { error: { variant: string; message: string } };

const fail = (variant: string, message: string): Reply => ({ error: { variant, message } });

export function answer(line: string): Reply {
  let input: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return fail("BadInput", "the line is not a JSON object");
    input = parsed as Record<string, unknown>;
  } catch {
    return fail("BadInput", "the line is not JSON");
  }
  const revision = input.revision;
  const frameId = input.frame;
  const frames = typeof revision === "string" ? registry[revision] : undefined;
  if (!frames) return fail("UnknownFrame", `unknown revision ${JSON.stringify(revision)}`);
  const entry = typeof frameId === "string" ? frames[frameId] : undefined;
  if (!entry) return fail("UnknownFrame", `unknown frame ${JSON.stringify(frameId)} in revision ${revision as string}`);

  if (typeof input.decode === "string") {
    let bytes: Uint8Array;
    try {
      bytes = fromHex(input.decode);
    } catch {
      return fail("BadInput", "decode is not lowercase hex");
    }
    try {
      return { value: toView(entry, entry.decode(bytes, { check: checkMcp })) };
    } catch (error) {
      if (error instanceof entry.error) return fail(error.variant, error.message);
      throw error;
    }
  }
  if ("encode" in input) {
    let value: unknown;
    try {
      value = fromView(entry, input.encode);
    } catch (error) {
      return fail("InvalidValue", (error as Error).message);
    }
    try {
      return { hex: toHex(entry.encode(value)) };
    } catch (error) {
      if (error instanceof EncodeError) return fail("InvalidValue", error.message);
      throw error;
    }
  }
  return fail("BadInput", "the line has neither decode nor encode");
}

/** The member every codec value names its variant in; a view names it as the spec does (`entry.discriminant`). */
export const VARIANT = "variant";

/** The variant a view names, in the spec's member. */
function variantOf(entry: FrameEntry, view: Record<string, unknown>): string {
  return entry.discriminant ? String(view[entry.discriminant]) : "";
}

/** A decoded value as its language-neutral view: the variant in the spec's member, bytes as lowercase hex. */
export function toView(entry: FrameEntry, value: unknown): unknown {
  const object = value as Record<string, unknown>;
  const variant = entry.discriminant ? String(object[VARIANT]) : "";
  const bytes = entry.bytesFields[variant] ?? [];
  const view: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(object)) {
    if (entry.discriminant && key === VARIANT) view[entry.discriminant] = field;
    else view[key] = bytes.includes(key) ? toHex(field as Uint8Array) : field;
  }
  return entry.postcard ? postcardToView(entry.postcard, variant, view) : view;
}

/** A view as the value the encoder takes: the variant under `variant`, hex becomes bytes. Keys keep their order. */
export function fromView(entry: FrameEntry, view: unknown): unknown {
  if (typeof view !== "object" || view === null || Array.isArray(view)) throw new Error("encode must be a JSON object");
  const object = view as Record<string, unknown>;
  if (entry.discriminant && !(variantOf(entry, object) in entry.bytesFields)) {
    throw new Error(`unknown ${entry.discriminant} ${JSON.stringify(object[entry.discriminant])}`);
  }
  const bytes = entry.bytesFields[variantOf(entry, object)] ?? [];
  const value: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(object)) {
    if (entry.discriminant && key === entry.discriminant) value[VARIANT] = field;
    else if (bytes.includes(key)) {
      if (typeof field !== "string") throw new Error(`${key} must be a hex string`);
      value[key] = fromHex(field);
    } else value[key] = field;
  }
  return entry.postcard ? postcardFromView(entry.postcard, variantOf(entry, object), value) : value;
}
