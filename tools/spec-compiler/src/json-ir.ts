// Named JSON types (`jsonTypes:`): the shapes a json field can carry beyond MCP's own types. An
// object of members, a union of objects told apart by the constant value of one member (`type`), or
// an array. Read as serde_json reads a plain struct: unknown members are ignored, a required member
// must be present, an optional one may be absent or null.
import type { PathKey, SourceFile } from "./load.js";

export type IrJsonScalar = "string" | "bool" | "u8" | "u64" | "number" | "decimal" | "any" | "object";
export const JSON_SCALARS: readonly IrJsonScalar[] = ["string", "bool", "u8", "u64", "number", "decimal", "any", "object"];

export type IrJsonRef =
  | { readonly kind: "scalar"; readonly scalar: IrJsonScalar }
  | { readonly kind: "named"; readonly name: string }
  | { readonly kind: "array"; readonly of: IrJsonRef }
  | { readonly kind: "nullable"; readonly of: IrJsonRef };

export interface IrJsonMember {
  readonly name: string;
  readonly type: IrJsonRef;
  readonly optional: boolean;
  readonly doc: string;
}

export interface IrJsonUnionVariant {
  /** The constant value of the union's `on` member that names this variant. */
  readonly value: string;
  /** The variant's own TypeScript type name. */
  readonly name: string;
  readonly doc: string;
  /** Every member but the discriminant: its own, then those of the object types under `with`. */
  readonly members: readonly IrJsonMember[];
  /** Its own members, and the object types whose members follow them. */
  readonly own: readonly IrJsonMember[];
  readonly with: readonly string[];
}

export type IrJsonShape =
  | { readonly kind: "object"; readonly members: readonly IrJsonMember[]; readonly own: readonly IrJsonMember[]; readonly with: readonly string[] }
  | { readonly kind: "union"; readonly on: string; readonly variants: readonly IrJsonUnionVariant[] }
  | { readonly kind: "array"; readonly of: IrJsonRef };

export interface IrJsonType {
  readonly name: string;
  readonly doc: string;
  readonly shape: IrJsonShape;
  readonly file: string;
}

type Raw = Record<string, any>;
type Fail = (file: SourceFile, path: readonly PathKey[], sentence: string) => void;
interface Located {
  readonly value: Raw;
  readonly file: SourceFile;
  readonly path: readonly PathKey[];
}

/** Resolves and checks every named JSON type; `taken` maps the names frames, errors and MCP types already use. */
export function buildJsonTypes(entries: readonly Located[], taken: ReadonlyMap<string, string>, fail: Fail): IrJsonType[] {
  const byName = new Map<string, Located>();
  const variantNames = new Map<string, string>();
  for (const entry of entries) {
    const t = entry.value;
    const clash = taken.get(t.name) ?? (byName.has(t.name) ? `JSON type ${t.name}` : variantNames.get(t.name));
    if (clash) fail(entry.file, [...entry.path, "name"], `JSON type name \`${t.name}\` is already the name of ${clash}.`);
    byName.set(t.name, entry);
    for (const [i, v] of ((t.union?.variants ?? []) as Raw[]).entries()) {
      const other = taken.get(v.name) ?? variantNames.get(v.name) ?? (v.name === t.name ? `JSON type ${t.name}` : undefined);
      if (other) fail(entry.file, [...entry.path, "union", "variants", i, "name"], `variant name \`${v.name}\` of JSON type \`${t.name}\` is already the name of ${other}.`);
      variantNames.set(v.name, `a variant of JSON type ${t.name}`);
    }
  }
  for (const [name, where] of variantNames) {
    const entry = byName.get(name);
    if (entry) fail(entry.file, [...entry.path, "name"], `JSON type name \`${name}\` is already the name of ${where}.`);
  }

  const ref = (raw: unknown, file: SourceFile, path: readonly PathKey[]): IrJsonRef => {
    if (typeof raw === "string") {
      if ((JSON_SCALARS as readonly string[]).includes(raw)) return { kind: "scalar", scalar: raw as IrJsonScalar };
      if (!byName.has(raw)) fail(file, path, `JSON type \`${raw}\` is not declared under \`jsonTypes\` of the revision.`);
      return { kind: "named", name: raw };
    }
    const r = raw as Raw;
    if ("array" in r) return { kind: "array", of: ref(r.array, file, [...path, "array"]) };
    return { kind: "nullable", of: ref(r.nullable, file, [...path, "nullable"]) };
  };

  const membersOf = (raw: Raw, file: SourceFile, path: readonly PathKey[], who: string, reserved?: string): IrJsonMember[] => {
    const out: IrJsonMember[] = ((raw.members ?? []) as Raw[]).map((m, i) => ({
      name: m.name,
      type: ref(m.type, file, [...path, "members", i, "type"]),
      optional: m.optional === true,
      doc: m.doc,
    }));
    for (const [i, name] of ((raw.with ?? []) as string[]).entries()) {
      const base = byName.get(name);
      if (!base || !base.value.members) {
        fail(file, [...path, "with", i], `${who} takes the members of \`${name}\`, which is not a JSON object type of the revision.`);
        continue;
      }
      if ((base.value.with ?? []).length > 0) fail(file, [...path, "with", i], `${who} takes the members of \`${name}\`, which itself takes others': name every object type it needs directly.`);
      out.push(...membersOf({ members: base.value.members }, base.file, base.path, `JSON type \`${name}\``));
    }
    const seen = new Set<string>();
    for (const m of out) {
      if (seen.has(m.name)) fail(file, path, `${who} has member \`${m.name}\` twice.`);
      if (m.name === reserved) fail(file, path, `${who} declares \`${m.name}\`, which is the union's discriminant.`);
      seen.add(m.name);
    }
    return out;
  };

  const types: IrJsonType[] = [];
  for (const entry of entries) {
    const t = entry.value;
    const who = `JSON type \`${t.name}\``;
    let shape: IrJsonShape;
    if (t.union) {
      const values = new Set<string>();
      const variants = ((t.union.variants ?? []) as Raw[]).map((v, i) => {
        const at = [...entry.path, "union", "variants", i];
        if (values.has(v.value)) fail(entry.file, [...at, "value"], `${who} has two variants whose \`${t.union.on}\` is \`${v.value}\`.`);
        values.add(v.value);
        const members = membersOf(v, entry.file, at, `variant \`${v.name}\` of ${who}`, t.union.on);
        const own = members.slice(0, (v.members ?? []).length);
        return { value: v.value, name: v.name, doc: v.doc, members, own, with: (v.with ?? []) as string[] };
      });
      shape = { kind: "union", on: t.union.on, variants };
    } else if (t.array !== undefined) {
      shape = { kind: "array", of: ref(t.array, entry.file, [...entry.path, "array"]) };
    } else {
      const members = membersOf(t, entry.file, entry.path, who);
      shape = { kind: "object", members, own: members.slice(0, (t.members ?? []).length), with: (t.with ?? []) as string[] };
    }
    types.push({ name: t.name, doc: t.doc, shape, file: entry.file.path });
  }

  // A type that contains itself could never be written out as an example or an arbitrary value.
  const named = new Map(types.map((t) => [t.name, t]));
  const refsOf = (r: IrJsonRef): string[] => (r.kind === "named" ? [r.name] : r.kind === "scalar" ? [] : refsOf(r.of));
  const direct = (t: IrJsonType): string[] =>
    t.shape.kind === "array" ? refsOf(t.shape.of) : (t.shape.kind === "object" ? t.shape.members : t.shape.variants.flatMap((v) => v.members)).flatMap((m) => refsOf(m.type));
  for (const t of types) {
    const stack = [...direct(t)];
    const seen = new Set<string>();
    while (stack.length > 0) {
      const n = stack.pop()!;
      if (n === t.name) {
        const entry = byName.get(t.name)!;
        fail(entry.file, [...entry.path, "name"], `JSON type \`${t.name}\` contains itself.`);
        break;
      }
      if (seen.has(n)) continue;
      seen.add(n);
      const inner = named.get(n);
      if (inner) stack.push(...direct(inner));
    }
  }
  return types;
}

/** A JSON type reference in words, for docs and diffs. */
export function jsonRefText(r: IrJsonRef): string {
  switch (r.kind) {
    case "scalar":
      return r.scalar;
    case "named":
      return r.name;
    case "array":
      return `array of ${jsonRefText(r.of)}`;
    case "nullable":
      return `${jsonRefText(r.of)} or null`;
  }
}
