// Views of values that hold postcard: a u64 is a bigint in TypeScript and decimal text in a view
// (JSON numbers cannot hold every u64); byte strings are hex. Generic: walks the shapes the
// generated registry lists, and names no frame.
import { fromHex, toHex } from "@diverge/codec";

export type ViewType = string | { readonly option: ViewType } | { readonly vec: ViewType } | { readonly ref: string };

export interface PostcardView {
  /** Every named shape: `{fields: [[name, type], …]}` or `{property, variants: {Name: [[name, type], …]}}`. */
  readonly shapes: Readonly<Record<string, unknown>>;
  /** For a postcard frame: the value's own type. */
  readonly root?: ViewType;
  /** For a frame with postcard fields: per variant ("" for a plain body), the postcard fields. */
  readonly fields?: Readonly<Record<string, Readonly<Record<string, ViewType>>>>;
}

type Shape = { fields?: [string, ViewType][]; property?: string; variants?: Record<string, [string, ViewType][]> };

/** The member every codec value names an enum's variant in; a view names it as the spec does (`property`). */
const VARIANT = "variant";

/**
 * Walks a value along a view type, applying `leaf` to each scalar. `toView`: a codec value (enums
 * under `variant`) becomes a view (enums under the spec's `property`), else the other way; the
 * member stays in its place.
 */
function walk(shapes: PostcardView["shapes"], type: ViewType, value: unknown, leaf: (scalar: string, value: unknown) => unknown, toView: boolean): unknown {
  if (typeof type === "string") return leaf(type, value);
  if ("option" in type) return value === null || value === undefined ? null : walk(shapes, type.option, value, leaf, toView);
  if ("vec" in type) {
    if (!Array.isArray(value)) throw new Error("a sequence must be an array");
    return value.map((v) => walk(shapes, type.vec, v, leaf, toView));
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`${type.ref} must be an object`);
  const shape = shapes[type.ref] as Shape;
  const object = value as Record<string, unknown>;
  const [from, to] = toView ? [VARIANT, shape.property!] : [shape.property!, VARIANT];
  const fields = shape.fields ?? shape.variants?.[String(object[from])] ?? [];
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(object)) {
    if (shape.variants && key === from) {
      out[to] = v;
      continue;
    }
    const field = fields.find(([name]) => name === key);
    out[key] = field ? walk(shapes, field[1], v, leaf, toView) : v;
  }
  return out;
}

const toViewLeaf = (scalar: string, value: unknown): unknown =>
  scalar === "u64" && typeof value === "bigint" ? value.toString() : scalar === "bytes" && value instanceof Uint8Array ? toHex(value) : value;

const fromViewLeaf = (scalar: string, value: unknown): unknown => {
  if (scalar === "u64") {
    if (typeof value === "string" && /^[0-9]+$/.test(value)) return BigInt(value);
    if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
    throw new Error("a u64 must be decimal text or a whole number");
  }
  if (scalar === "bytes") {
    if (typeof value !== "string") throw new Error("bytes must be a hex string");
    return fromHex(value);
  }
  return value;
};

function apply(view: PostcardView, variant: string, value: unknown, leaf: (scalar: string, value: unknown) => unknown, toView: boolean): unknown {
  if (view.root) return walk(view.shapes, view.root, value, leaf, toView);
  const fields = view.fields?.[variant];
  if (!fields) return value;
  const object = value as Record<string, unknown>;
  return Object.fromEntries(Object.entries(object).map(([k, v]) => [k, fields[k] ? walk(view.shapes, fields[k], v, leaf, toView) : v]));
}

/** A codec value's postcard parts as a view; the frame's own variant is already the view's. */
export const postcardToView = (view: PostcardView, variant: string, value: unknown) => apply(view, variant, value, toViewLeaf, true);
/** A view's postcard parts as the codec's value. */
export const postcardFromView = (view: PostcardView, variant: string, value: unknown) => apply(view, variant, value, fromViewLeaf, false);
