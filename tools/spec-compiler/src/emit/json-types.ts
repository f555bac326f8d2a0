// The named JSON types of a revision (`jsonTypes:`), for the codec: one TypeScript type per type and
// per union variant, and one check per type (`check<Name>(value)`: `undefined` when the value is of
// the type, else why not), which the decoders of json fields that name the type run. The reasons are
// worded like serde_json's and quote no value, only member names and positions.
import type { IrJsonMember, IrJsonRef, IrJsonType, IrRevision } from "../ir.js";
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

/** Statements that check `v` (at position expression `at`) against `r`, returning the reason when it is not. */
function checkExpr(r: IrJsonRef, v: string, at: string): string {
  switch (r.kind) {
    case "scalar":
      switch (r.scalar) {
        case "any":
          return "undefined";
        case "string":
          return `(typeof ${v} === "string" ? undefined : $wrong("a string", ${at}))`;
        case "bool":
          return `(typeof ${v} === "boolean" ? undefined : $wrong("a boolean", ${at}))`;
        case "number":
          return `(typeof ${v} === "number" ? undefined : $wrong("a number", ${at}))`;
        case "decimal":
          return `(typeof ${v} === "number" || typeof ${v} === "string" ? undefined : $wrong("a number or a string of one", ${at}))`;
        case "u8":
          return `(Number.isInteger(${v}) && (${v} as number) >= 0 && (${v} as number) <= 255 ? undefined : $wrong("an integer from 0 to 255", ${at}))`;
        case "u64":
          return `(Number.isInteger(${v}) && (${v} as number) >= 0 ? undefined : $wrong("a non-negative integer", ${at}))`;
        case "object":
          return `($isObject(${v}) ? undefined : $wrong("an object", ${at}))`;
      }
    // falls through (unreachable)
    case "named":
      return `$${checkName(r.name)}(${v}, ${at})`;
    case "array":
      return `$array(${v}, ${at}, (item, where) => ${checkExpr(r.of, "item", "where")})`;
    case "nullable":
      return `(${v} === null ? undefined : ${checkExpr(r.of, v, at)})`;
  }
}

function membersCheck(members: readonly IrJsonMember[]): string[] {
  const out: string[] = [];
  for (const m of members) {
    const get = `o[${lit(m.name)}]`;
    const at = `$at(at, ${lit(m.name)})`;
    if (m.optional) {
      out.push(`  if (${get} !== undefined && ${get} !== null) {`);
      out.push(`    const $p = ${checkExpr(m.type, get, at)};`);
      out.push(`    if ($p !== undefined) return $p;`);
      out.push(`  }`);
    } else {
      out.push(`  if (!$has(o, ${lit(m.name)})) return $missing(${lit(m.name)}, at);`);
      if (!(m.type.kind === "scalar" && m.type.scalar === "any")) {
        out.push(`  {`);
        out.push(`    const $p = ${checkExpr(m.type, get, at)};`);
        out.push(`    if ($p !== undefined) return $p;`);
        out.push(`  }`);
      }
    }
  }
  return out;
}

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

  lines.push(`const $has = (o: Record<string, unknown>, key: string): boolean => Object.prototype.hasOwnProperty.call(o, key);`);
  lines.push(`const $isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);`);
  lines.push(`const $at = (at: string, member: string): string => (at === "" ? member : \`\${at}.\${member}\`);`);
  lines.push(`const $where = (at: string): string => (at === "" ? "" : \` at \\\`\${at}\\\`\`);`);
  lines.push(`const $wrong = (expected: string, at: string): string => \`invalid type: expected \${expected}\${$where(at)}\`;`);
  lines.push(`const $missing = (member: string, at: string): string => \`missing field \\\`\${member}\\\`\${$where(at)}\`;`);
  lines.push(`function $array(v: unknown, at: string, item: (value: unknown, at: string) => string | undefined): string | undefined {`);
  lines.push(`  if (!Array.isArray(v)) return $wrong("an array", at);`);
  lines.push(`  for (let i = 0; i < v.length; i++) {`);
  lines.push(`    const p = item(v[i], \`\${at}[\${i}]\`);`);
  lines.push(`    if (p !== undefined) return p;`);
  lines.push(`  }`);
  lines.push(`  return undefined;`);
  lines.push(`}`);
  lines.push("");
  for (const t of ir.jsonTypes) {
    const fn = `$${checkName(t.name)}`;
    lines.push(`function ${fn}(v: unknown, at: string): string | undefined {`);
    if (t.shape.kind === "array") {
      lines.push(`  return ${checkExpr({ kind: "array", of: t.shape.of }, "v", "at")};`);
    } else if (t.shape.kind === "object") {
      lines.push(`  if (!$isObject(v)) return $wrong("an object", at);`);
      lines.push(`  const o = v;`);
      lines.push(...membersCheck(t.shape.members));
      lines.push(`  return undefined;`);
    } else {
      const { on } = t.shape;
      lines.push(`  if (!$isObject(v)) return $wrong("an object", at);`);
      lines.push(`  const o = v;`);
      lines.push(`  if (!$has(o, ${lit(on)})) return $missing(${lit(on)}, at);`);
      lines.push(`  switch (o[${lit(on)}]) {`);
      for (const variant of t.shape.variants) {
        lines.push(`    case ${lit(variant.value)}:`);
        lines.push(`      return ${fn}${variant.name}(o, at);`);
      }
      lines.push(`    default:`);
      lines.push(`      return \`unknown variant: \\\`${on}\\\` names no ${t.name}\${$where(at)}\`;`);
      lines.push(`  }`);
      lines.push(`}`);
      for (const variant of t.shape.variants) {
        lines.push("");
        lines.push(`function ${fn}${variant.name}(o: Record<string, unknown>, at: string): string | undefined {`);
        lines.push(...membersCheck(variant.members));
        lines.push(`  return undefined;`);
        if (variant !== t.shape.variants[t.shape.variants.length - 1]) lines.push(`}`);
      }
    }
    lines.push(`}`);
    lines.push("");
    lines.push(`/** \`undefined\` when \`value\` is a {@link ${t.name}}, else why not (serde_json's wording; no value quoted). */`);
    lines.push(`export function ${checkName(t.name)}(value: unknown): string | undefined {`);
    lines.push(`  return ${fn}(value, "");`);
    lines.push(`}`);
    lines.push("");
    lines.push(`/** Whether \`value\` is a {@link ${t.name}}. */`);
    lines.push(`export function is${t.name}(value: unknown): value is ${t.name} {`);
    lines.push(`  return ${fn}(value, "") === undefined;`);
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
