// Postcard in the spec: named postcard types (`postcardTypes:`), frames whose whole payload is one
// postcard value (`postcard:` instead of `body:`/`switch:`), and body fields that carry such a frame
// to the end of the payload (`type: postcard`). This file resolves and checks them for the IR.
import type { PathKey, SourceFile } from "./load.js";

/**
 * The one member every generated union names its variant in, for every frame with a `switch:` and
 * every postcard enum, whatever the spec calls it (`property:`: `type`, `kind`, `endpoint`, `ask`,
 * `ack`, `answer` or `variant`). The spec's name stays data: in the IR (`property`), in the
 * language-neutral views of the conformance vectors and testee, and in the wire reference. As
 * protobuf-es's `case`, one name means one `switch (value.variant)` for every union.
 */
export const DISCRIMINANT = "variant";

/** The doc sentence that keeps the spec's own name for a union's discriminant, when it differs. */
export function specName(property: string): string {
  return property === DISCRIMINANT ? "" : ` The spec, and a conformance view, name this member \`${property}\`.`;
}

export type PostcardScalar = "u8" | "u16" | "u32" | "u64" | "bool" | "string" | "bytes";
export const POSTCARD_SCALARS: readonly PostcardScalar[] = ["u8", "u16", "u32", "u64", "bool", "string", "bytes"];

export type PostcardTypeRef =
  | { readonly kind: "scalar"; readonly scalar: PostcardScalar }
  | { readonly kind: "option"; readonly of: PostcardTypeRef }
  | { readonly kind: "vec"; readonly of: PostcardTypeRef }
  | { readonly kind: "ref"; readonly id: string; readonly name: string };

export interface IrPostcardField {
  readonly name: string;
  readonly type: PostcardTypeRef;
  readonly doc: string;
}

export type IrPostcardShape =
  | { readonly kind: "struct"; readonly fields: readonly IrPostcardField[] }
  | {
      readonly kind: "enum";
      readonly property: string;
      readonly variants: readonly { readonly name: string; readonly doc: string; readonly fields: readonly IrPostcardField[] }[];
    };

export interface IrPostcardType {
  readonly id: string;
  readonly name: string;
  readonly doc: string;
  readonly shape: IrPostcardShape;
}

/** The error variants every postcard frame's error type must have, with the fields each carries. */
export const POSTCARD_ERROR_VARIANTS: Readonly<Record<string, readonly string[]>> = {
  DeserializeUnexpectedEnd: [],
  DeserializeBadVarint: [],
  DeserializeBadBool: [],
  DeserializeBadUtf8: [],
  DeserializeBadOption: [],
  UnknownVariant: ["index", "count"],
  TooDeep: ["limit"],
};

type Raw = Record<string, any>;
type Fail = (file: SourceFile, path: readonly PathKey[], sentence: string) => void;

export function parsePostcardRef(raw: unknown, names: ReadonlyMap<string, string>): PostcardTypeRef {
  if (typeof raw === "string") {
    return (POSTCARD_SCALARS as readonly string[]).includes(raw) ? { kind: "scalar", scalar: raw as PostcardScalar } : { kind: "ref", id: raw, name: names.get(raw) ?? raw };
  }
  const r = raw as Raw;
  if ("option" in r) return { kind: "option", of: parsePostcardRef(r.option, names) };
  return { kind: "vec", of: parsePostcardRef(r.vec, names) };
}

/** Builds a shape from `fields:` or `enum:`, checking names and that every reference names a declared type. */
export function buildPostcardShape(raw: Raw, known: ReadonlyMap<string, string>, file: SourceFile, path: readonly PathKey[], fail: Fail): IrPostcardShape {
  const fieldsOf = (list: Raw[], at: readonly PathKey[], reserved?: string): IrPostcardField[] => {
    const names = new Set<string>();
    return list.map((f, i) => {
      if (names.has(f.name) || f.name === reserved || f.name === DISCRIMINANT) fail(file, [...at, i, "name"], `postcard field \`${f.name}\` appears twice, or has the name of the enum's discriminant.`);
      names.add(f.name);
      const type = parsePostcardRef(f.type, known);
      checkRef(type, known, file, [...at, i, "type"], fail);
      return { name: f.name, type, doc: f.doc };
    });
  };
  if (raw.fields) {
    if ((raw.fields as Raw[]).length === 0) fail(file, [...path, "fields"], "a postcard struct needs at least one field: one of none takes no bytes, so a sequence of them could never end.");
    return { kind: "struct", fields: fieldsOf(raw.fields, [...path, "fields"]) };
  }
  const e = raw.enum as Raw;
  const vnames = new Set<string>();
  const variants = (e.variants as Raw[]).map((v, i) => {
    if (vnames.has(v.name)) fail(file, [...path, "enum", "variants", i, "name"], `postcard variant \`${v.name}\` appears twice.`);
    vnames.add(v.name);
    return { name: v.name as string, doc: v.doc as string, fields: fieldsOf(v.fields ?? [], [...path, "enum", "variants", i, "fields"], e.property) };
  });
  return { kind: "enum", property: e.property, variants };
}

function checkRef(ref: PostcardTypeRef, known: ReadonlyMap<string, string>, file: SourceFile, path: readonly PathKey[], fail: Fail): void {
  if (ref.kind === "option" || ref.kind === "vec") return checkRef(ref.of, known, file, path, fail);
  if (ref.kind === "ref" && !known.has(ref.id)) fail(file, path, `postcard type \`${ref.id}\` is not declared under \`postcardTypes\` of the revision.`);
}

/** Every named type, from the revision's `postcardTypes` lists. */
export function buildPostcardTypes(entries: readonly { value: Raw; file: SourceFile; path: readonly PathKey[] }[], fail: Fail): IrPostcardType[] {
  const known = new Map(entries.map((e) => [e.value.id as string, e.value.name as string]));
  const seen = new Set<string>();
  return entries.map(({ value, file, path }) => {
    if (seen.has(value.id)) fail(file, [...path, "id"], `postcard type id \`${value.id}\` is declared twice.`);
    seen.add(value.id);
    return { id: value.id, name: value.name, doc: value.doc, shape: buildPostcardShape(value, known, file, path, fail) };
  });
}

/** A postcard frame's error type must carry every postcard failure, so its decoder can raise each. */
export function checkPostcardErrorType(errorVariants: readonly Raw[] | undefined, file: SourceFile, path: readonly PathKey[], errorTypeId: string, fail: Fail): void {
  for (const [name, fields] of Object.entries(POSTCARD_ERROR_VARIANTS)) {
    const v = errorVariants?.find((x) => x.name === name);
    if (!v) {
      fail(file, path, `a postcard frame's error type must have variant \`${name}\`; \`${errorTypeId}\` does not.`);
      continue;
    }
    const have = ((v.fields ?? []) as Raw[]).map((f) => f.name);
    for (const field of fields) if (!have.includes(field)) fail(file, path, `variant \`${name}\` of \`${errorTypeId}\` must carry \`${field}\`.`);
  }
}
