// The named JSON types of a revision (`jsonTypes:`), for the codec: one TypeScript type per type and
// per union variant, and one check per type (`check<Name>(value)`: `undefined` when the value is of
// the type, else why not), which the decoders of json fields that name the type run. The reasons are
// worded like serde_json's and quote no value, only member names and positions.
import type { IrJsonMember, IrJsonRef, IrJsonType, IrRevision } from "../ir.js";
import type { IrJsonScalar } from "../json-ir.js";
import { lit } from "../names.js";
import { banner, type GeneratedFile } from "./project.js";

export const jsonTypesModule = (rev: string) => `gen/${rev}/json-types.ts`;
export const checkName = (name: string) => `check${name}`;

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").replace(/\*\//g, "*\\/").trim();
}

/** The TypeScript type of a reference. */
export function jsonRefType(r: IrJsonRef): string {
  switch (r.kind) {
    case "scalar":
      return { string: "string", bool: "boolean", u8: "number", u64: "number", number: "number", decimal: "number | string", any: "unknown", object: "Record<string, unknown>" }[r.scalar];
    case "named":
      return r.name;
    case "array": {
      const inner = jsonRefType(r.of);
      return /[ |]/.test(inner) ? `(${inner})[]` : `${inner}[]`;
    }
    case "nullable":
      return `${jsonRefType(r.of)} | null`;
  }
}

const memberKey = (name: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : lit(name));

function interfaceLines(name: string, doc: string, members: readonly IrJsonMember[], discriminant?: { on: string; value: string }): string[] {
  const out = [`/** ${oneLine(doc)} */`, `export interface ${name} {`];
  if (discriminant) out.push(`  readonly ${memberKey(discriminant.on)}: ${lit(discriminant.value)};`);
  for (const m of members) {
    out.push(`  /** ${oneLine(m.doc)}${m.optional ? " May be absent or null." : ""} */`);
    out.push(`  readonly ${memberKey(m.name)}${m.optional ? "?" : ""}: ${jsonRefType(m.type)}${m.optional ? " | null" : ""};`);
  }
  out.push(`}`);
  return out;
}

const SCALAR_CODES: Record<IrJsonScalar, string> = {
  string: "s",
  bool: "b",
  number: "n",
  decimal: "d",
  u8: "u8",
  u64: "u64",
  object: "o",
  any: "a",
};

export function emitJsonTypes(ir: IrRevision, compilerVersion: string): GeneratedFile | undefined {
  if (ir.jsonTypes.length === 0) return undefined;
  const lines: string[] = [banner(ir, compilerVersion).trimEnd()];
  lines.push(`// The named JSON types of revision ${ir.revision} and their checks. A check reads a value as serde_json`);
  lines.push(`// reads the type: unknown members are ignored, required members must be there, an optional member may`);
  lines.push(`// be absent or null. Its reason names members and positions, never a value.`);
  lines.push("");
  for (const t of ir.jsonTypes) {
    if (t.shape.kind === "object") lines.push(...interfaceLines(t.name, t.doc, t.shape.members));
    else if (t.shape.kind === "array") lines.push(`/** ${oneLine(t.doc)} */`, `export type ${t.name} = ${jsonRefType({ kind: "array", of: t.shape.of })};`);
    else {
      const shape = t.shape;
      for (const v of shape.variants) {
        lines.push(...interfaceLines(v.name, v.doc, v.members, { on: shape.on, value: v.value }));
        lines.push("");
      }
      lines.push(`/** ${oneLine(t.doc)} The \`${shape.on}\` member decides which variant a value is. */`);
      lines.push(`export type ${t.name} =`);
      shape.variants.forEach((v, i) => lines.push(`  | ${v.name}${i === shape.variants.length - 1 ? ";" : ""}`));
      lines.push("");
      lines.push(`/** Every \`${shape.on}\` a {@link ${t.name}} can have, in the spec's order. */`);
      lines.push(`export const ${t.name[0]!.toLowerCase()}${t.name.slice(1)}Kinds = [${shape.variants.map((v) => lit(v.value)).join(", ")}] as const;`);
    }
    lines.push("");
  }

  // The checks read one table: a type's members (or the object types whose members follow them), a
  // union's variants by discriminant, an array's element. One small reader walks it, so the checks of
  // every type cost a few bytes each in a consumer's bundle.
  const ref = (r: IrJsonRef): string => {
    switch (r.kind) {
      case "scalar":
        return lit(SCALAR_CODES[r.scalar]);
      case "named":
        return lit(r.name);
      case "array":
        return `["[", ${ref(r.of)}]`;
      case "nullable":
        return `["?", ${ref(r.of)}]`;
    }
  };
  const members = (own: readonly IrJsonMember[], withs: readonly string[]) =>
    `[${[...own.map((m) => `[${lit(m.name)}, ${ref(m.type)}, ${m.optional ? 1 : 0}]`), ...withs.map(lit)].join(", ")}]`;
  lines.push(`/** A type: a scalar's code, a type's name, or an array (\`[\`) or nullable (\`?\`) of one. */`);
  lines.push(`type $Ref = string | readonly ["[" | "?", $Ref];`);
  lines.push(`/** A member (name, type, 1 when optional), or the name of an object type whose members follow. */`);
  lines.push(`type $Member = readonly [string, $Ref, 0 | 1] | string;`);
  lines.push(`type $Shape = { readonly m: readonly $Member[] } | { readonly a: $Ref } | { readonly on: string; readonly n: string; readonly v: ReadonlyMap<string, readonly $Member[]> };`);
  lines.push("");
  lines.push(`const $types: { readonly [name: string]: $Shape } = {`);
  for (const t of ir.jsonTypes) {
    if (t.shape.kind === "array") lines.push(`  ${t.name}: { a: ${ref(t.shape.of)} },`);
    else if (t.shape.kind === "object") lines.push(`  ${t.name}: { m: ${members(t.shape.own, t.shape.with)} },`);
    else {
      lines.push(`  ${t.name}: {`);
      lines.push(`    on: ${lit(t.shape.on)},`);
      lines.push(`    n: ${lit(t.name)},`);
      lines.push(`    v: new Map<string, readonly $Member[]>([`);
      for (const v of t.shape.variants) lines.push(`      [${lit(v.value)}, ${members(v.own, v.with)}],`);
      lines.push(`    ]),`);
      lines.push(`  },`);
    }
  }
  lines.push(`};`);
  lines.push("");
  lines.push(`const $scalars: { readonly [code: string]: readonly [string, (v: unknown) => boolean] } = {`);
  lines.push(`  s: ["a string", (v) => typeof v === "string"],`);
  lines.push(`  b: ["a boolean", (v) => typeof v === "boolean"],`);
  lines.push(`  n: ["a number", (v) => typeof v === "number"],`);
  lines.push(`  d: ["a number or a string of one", (v) => typeof v === "number" || typeof v === "string"],`);
  lines.push(`  u8: ["an integer from 0 to 255", (v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 255],`);
  lines.push(`  u64: ["a non-negative integer", (v) => Number.isInteger(v) && (v as number) >= 0],`);
  lines.push(`  o: ["an object", (v) => $isObject(v)],`);
  lines.push(`  a: ["any JSON value", () => true],`);
  lines.push(`};`);
  lines.push("");
  lines.push(`const $has = (o: object, key: string): boolean => Object.prototype.hasOwnProperty.call(o, key);`);
  lines.push(`const $isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);`);
  lines.push(`const $where = (at: string): string => (at === "" ? "" : \` at \\\`\${at}\\\`\`);`);
  lines.push(`const $wrong = (expected: string, at: string): string => \`invalid type: expected \${expected}\${$where(at)}\`;`);
  lines.push(`const $missing = (member: string, at: string): string => \`missing field \\\`\${member}\\\`\${$where(at)}\`;`);
  lines.push("");
  lines.push(`function $check(r: $Ref, v: unknown, at: string): string | undefined {`);
  lines.push(`  if (typeof r !== "string") {`);
  lines.push(`    if (r[0] === "?") return v === null ? undefined : $check(r[1], v, at);`);
  lines.push(`    if (!Array.isArray(v)) return $wrong("an array", at);`);
  lines.push(`    for (let i = 0; i < v.length; i++) {`);
  lines.push(`      const p = $check(r[1], v[i], \`\${at}[\${i}]\`);`);
  lines.push(`      if (p !== undefined) return p;`);
  lines.push(`    }`);
  lines.push(`    return undefined;`);
  lines.push(`  }`);
  lines.push(`  const scalar = $has($scalars, r) ? $scalars[r] : undefined;`);
  lines.push(`  if (scalar) return scalar[1](v) ? undefined : $wrong(scalar[0], at);`);
  lines.push(`  const t = $types[r]!;`);
  lines.push(`  if ("a" in t) return $check(["[", t.a], v, at);`);
  lines.push(`  if (!$isObject(v)) return $wrong("an object", at);`);
  lines.push(`  if (!("on" in t)) return $members(t.m, v, at);`);
  lines.push(`  if (!$has(v, t.on)) return $missing(t.on, at);`);
  lines.push(`  const kind = v[t.on];`);
  lines.push(`  const members = typeof kind === "string" ? t.v.get(kind) : undefined;`);
  lines.push(`  return members ? $members(members, v, at) : \`unknown variant: \\\`\${t.on}\\\` names no \${t.n}\${$where(at)}\`;`);
  lines.push(`}`);
  lines.push("");
  lines.push(`function $members(members: readonly $Member[], o: Record<string, unknown>, at: string): string | undefined {`);
  lines.push(`  for (const m of members) {`);
  lines.push(`    if (typeof m === "string") {`);
  lines.push(`      const p = $members(($types[m] as { readonly m: readonly $Member[] }).m, o, at);`);
  lines.push(`      if (p !== undefined) return p;`);
  lines.push(`      continue;`);
  lines.push(`    }`);
  lines.push(`    const [name, r, optional] = m;`);
  lines.push(`    const v = $has(o, name) ? o[name] : undefined;`);
  lines.push(`    if (v === undefined || (optional && v === null)) {`);
  lines.push(`      if (optional) continue;`);
  lines.push(`      return $missing(name, at);`);
  lines.push(`    }`);
  lines.push(`    const p = $check(r, v, at === "" ? name : \`\${at}.\${name}\`);`);
  lines.push(`    if (p !== undefined) return p;`);
  lines.push(`  }`);
  lines.push(`  return undefined;`);
  lines.push(`}`);
  lines.push("");
  for (const t of ir.jsonTypes) {
    lines.push(`/** \`undefined\` when \`value\` is a {@link ${t.name}}, else why not (serde_json's wording; no value quoted). */`);
    lines.push(`export function ${checkName(t.name)}(value: unknown): string | undefined {`);
    lines.push(`  return $check(${lit(t.name)}, value, "");`);
    lines.push(`}`);
    lines.push("");
  }
  return { path: `packages/codec/src/${jsonTypesModule(ir.revision)}`, text: lines.join("\n").trimEnd() + "\n" };
}

/** A fast-check arbitrary (source text) for values of `r`, given the arbitraries of named types by name in `named`. */
export function jsonRefArbitrary(r: IrJsonRef, named: (name: string) => string): string {
  switch (r.kind) {
    case "scalar":
      return {
        string: "fc.string({ maxLength: 12 })",
        bool: "fc.boolean()",
        u8: "fc.integer({ min: 0, max: 255 })",
        u64: "fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })",
        number: "fc.double({ noNaN: true, noDefaultInfinity: true })",
        decimal: "fc.oneof(fc.integer(), fc.string({ maxLength: 8 }))",
        any: "fc.jsonValue({ maxDepth: 2 })",
        object: "fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 })",
      }[r.scalar];
    case "named":
      return named(r.name);
    case "array":
      return `fc.array(${jsonRefArbitrary(r.of, named)}, { maxLength: 3 })`;
    case "nullable":
      return `fc.option(${jsonRefArbitrary(r.of, named)}, { nil: null })`;
  }
}

/** The arbitraries of every named JSON type, as one object literal's source (`{ Name: fc.memo-free arbitrary, … }`), in dependency order. */
export function jsonTypeArbitraries(types: readonly IrJsonType[]): string[] {
  const out: string[] = [];
  const record = (members: readonly IrJsonMember[], fixed?: { on: string; value: string }) => {
    const props = [
      ...(fixed ? [`${lit(fixed.on)}: fc.constant(${lit(fixed.value)})`] : []),
      ...members.map((m) => `${lit(m.name)}: ${jsonRefArbitrary(m.type, (n) => `jsonTypes[${lit(n)}]!`)}`),
    ];
    const required = [...(fixed ? [fixed.on] : []), ...members.filter((m) => !m.optional).map((m) => m.name)];
    return `fc.record({ ${props.join(", ")} }, { requiredKeys: [${required.map(lit).join(", ")}] })`;
  };
  // A type is written after every type it names (the spec has no cycles).
  const done = new Set<string>();
  const refs = (r: IrJsonRef): string[] => (r.kind === "named" ? [r.name] : r.kind === "scalar" ? [] : refs(r.of));
  const needs = (t: IrJsonType) =>
    t.shape.kind === "array" ? refs(t.shape.of) : (t.shape.kind === "object" ? t.shape.members : t.shape.variants.flatMap((v) => v.members)).flatMap((m) => refs(m.type));
  const pending = [...types];
  while (pending.length > 0) {
    const i = pending.findIndex((t) => needs(t).every((n) => done.has(n)));
    const t = pending.splice(i < 0 ? 0 : i, 1)[0]!;
    let arb: string;
    if (t.shape.kind === "array") arb = jsonRefArbitrary({ kind: "array", of: t.shape.of }, (n) => `jsonTypes[${lit(n)}]!`);
    else if (t.shape.kind === "object") arb = record(t.shape.members);
    else {
      const on = t.shape.on;
      arb = `fc.oneof(${t.shape.variants.map((v) => record(v.members, { on, value: v.value })).join(", ")})`;
    }
    out.push(`jsonTypes[${lit(t.name)}] = json(${arb});`);
    done.add(t.name);
  }
  return out;
}
