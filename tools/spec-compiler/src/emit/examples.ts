// The golden examples of the spec, turned into vitest files for the codec and into the
// language-neutral vector corpus that `diverge-conformance` runs.
import { bytesToHex, DISCRIMINANT, errorTypeOf, type IrField, type IrFrame, type IrRevision } from "../ir.js";
import { decodeName, encodeName, frameModule, importPath, lit } from "../names.js";
import { banner, type GeneratedFile } from "./project.js";
import { frameViewFields, hasPostcard, normalizeView, postcardArbitraries, postcardFieldArbitrary, postcardLiteral } from "./postcard.js";
import { listArbitrary } from "./list.js";
import { jsonTypeArbitraries } from "./json-types.js";

/** The fields of the frame's value that hold bytes (hex in a view), for the variant a value names. */
export function bytesFieldsOf(frame: IrFrame, value: Record<string, unknown>): readonly IrField[] {
  if (frame.postcard) return [];
  if (frame.body) return frame.body.fields.filter((f) => f.type === "bytes");
  const variant = frame.switch!.variants.find((v) => v.name === value[frame.switch!.property]);
  return variant ? variant.body.fields.filter((f) => f.type === "bytes") : [];
}

/** An example's value (the spec's view) as the codec's value in TypeScript: the variant under {@link DISCRIMINANT}, bytes and u64 as the codec holds them. */
function valueToTs(ir: IrRevision, frame: IrFrame, value: Record<string, unknown>): string {
  if (frame.postcard) return postcardLiteral(ir, { ref: frame.id }, value);
  const postcard = frameViewFields(frame)[frame.switch ? String(value[frame.switch.property]) : ""] ?? {};
  const bytes = new Set(bytesFieldsOf(frame, value).map((f) => f.name));
  const key = (k: string) => (frame.switch && k === frame.switch.property ? DISCRIMINANT : k);
  const parts = Object.entries(value).map(([k, v]) => `${lit(key(k))}: ${bytes.has(k) ? `fromHex(${lit(String(v))})` : postcard[k] ? postcardLiteral(ir, postcard[k]!, v) : JSON.stringify(v)}`);
  return `{ ${parts.join(", ")} }`;
}

export function emitCodecTests(ir: IrRevision, compilerVersion: string): GeneratedFile[] {
  const out: GeneratedFile[] = [];
  for (const frame of ir.frames) {
    if (frame.examples.length === 0) continue;
    const testPath = `test/gen/${ir.revision}/${frame.id}.test.ts`;
    const modulePath = `src/gen/${ir.revision}/${frameModule(frame)}`;
    const errorType = errorTypeOf(ir, frame.errorTypeId)!;
    const errorModulePath = errorType.usedBy.length === 1 ? modulePath : `src/gen/${ir.revision}/${errorType.id}.ts`;
    const lines: string[] = [];
    lines.push(banner(ir, compilerVersion).trimEnd());
    lines.push(`import { describe, expect, it } from "vitest";`);
    lines.push(`import { checkMcp } from ${lit(importPath(testPath, "src/mcp.ts"))};`);
    lines.push(`import { fromHex, toHex } from ${lit(importPath(testPath, "src/runtime/index.ts"))};`);
    if (errorModulePath === modulePath) {
      lines.push(`import { ${decodeName(frame)}, ${encodeName(frame)}, ${errorType.name} } from ${lit(importPath(testPath, modulePath))};`);
    } else {
      lines.push(`import { ${decodeName(frame)}, ${encodeName(frame)} } from ${lit(importPath(testPath, modulePath))};`);
      lines.push(`import { ${errorType.name} } from ${lit(importPath(testPath, errorModulePath))};`);
    }
    lines.push("");
    lines.push(`const options = { check: checkMcp };`);
    lines.push("");
    lines.push(`function failure(run: () => unknown): ${errorType.name} {`);
    lines.push(`  try {`);
    lines.push(`    run();`);
    lines.push(`  } catch (error) {`);
    lines.push(`    expect(error).toBeInstanceOf(${errorType.name});`);
    lines.push(`    return error as ${errorType.name};`);
    lines.push(`  }`);
    lines.push(`  throw new Error("decoding succeeded where the spec says it fails");`);
    lines.push(`}`);
    lines.push("");
    lines.push(`describe(${lit(`${frame.id} (${ir.revision}) golden examples`)}, () => {`);
    for (const e of frame.examples) {
      const hex = bytesToHex(e.bytes);
      if (e.value) {
        lines.push(`  it(${lit(`decodes ${e.name}`)}, () => {`);
        lines.push(`    const value = ${decodeName(frame)}(fromHex(${lit(hex)}), options);`);
        lines.push(`    expect(value).toEqual(${valueToTs(ir, frame, e.value)});`);
        if (e.roundTrip) lines.push(`    expect(toHex(${encodeName(frame)}(value))).toBe(${lit(hex)});`);
        lines.push(`  });`);
        if (e.roundTrip) {
          lines.push(`  it(${lit(`encodes ${e.name}`)}, () => {`);
          lines.push(`    expect(toHex(${encodeName(frame)}(${valueToTs(ir, frame, e.value)} as Parameters<typeof ${encodeName(frame)}>[0]))).toBe(${lit(hex)});`);
          lines.push(`  });`);
        }
      } else {
        const err = e.error!;
        lines.push(`  it(${lit(`refuses ${e.name}`)}, () => {`);
        lines.push(`    const error = failure(() => ${decodeName(frame)}(fromHex(${lit(hex)}), options));`);
        lines.push(`    expect(error.variant).toBe(${lit(err.variant)});`);
        if (err.message !== undefined) lines.push(`    expect(error.message).toBe(${lit(err.message)});`);
        else lines.push(`    expect(error.message.startsWith(${lit(err.messagePrefix!)})).toBe(true);`);
        lines.push(`  });`);
      }
    }
    lines.push(`});`);
    out.push({ path: `packages/codec/${testPath}`, text: lines.join("\n") + "\n" });
  }
  return out;
}

/** One JSON line per check: what to send `diverge-conformance`, and what must come back. */
export function emitVectors(ir: IrRevision): GeneratedFile {
  const lines: string[] = [];
  for (const frame of ir.frames) {
    for (const example of frame.examples) {
      const hex = bytesToHex(example.bytes);
      const e = example.value && hasPostcard(frame) ? { ...example, value: viewOf(ir, frame, example.value) } : example;
      if (e.value) {
        lines.push(JSON.stringify({ name: `${frame.id}: decodes ${e.name}`, input: { revision: ir.revision, frame: frame.id, decode: hex }, expect: { value: e.value } }));
        if (e.roundTrip) lines.push(JSON.stringify({ name: `${frame.id}: encodes ${e.name}`, input: { revision: ir.revision, frame: frame.id, encode: e.value }, expect: { hex } }));
      } else {
        lines.push(JSON.stringify({ name: `${frame.id}: refuses ${e.name}`, input: { revision: ir.revision, frame: frame.id, decode: hex }, expect: { error: e.error } }));
      }
    }
  }
  return { path: `packages/conformance/vectors/${ir.revision}.jsonl`, text: lines.join("\n") + "\n" };
}

/** An example's value as the testee's view: u64 as decimal text wherever postcard holds one. */
function viewOf(ir: IrRevision, frame: IrFrame, value: Record<string, unknown>): Record<string, unknown> {
  if (frame.postcard) return normalizeView(ir, { ref: frame.id }, value) as Record<string, unknown>;
  const fields = frameViewFields(frame)[frame.switch ? String(value[frame.switch.property]) : ""] ?? {};
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fields[k] ? normalizeView(ir, fields[k]!, v) : v]));
}

/**
 * fast-check arbitraries for every frame of a revision, derived from the IR, plus each frame's golden
 * bytes as seeds for mutation. The hand-written property tests iterate over this table.
 */
export function emitArbitraries(ir: IrRevision, compilerVersion: string): GeneratedFile {
  const testPath = `test/gen/${ir.revision}/arbitraries.ts`;
  const lines: string[] = [banner(ir, compilerVersion).trimEnd(), `import fc from "fast-check";`, `import * as codec from ${lit(importPath(testPath, `src/gen/${ir.revision}/index.ts`))};`, ""];
  lines.push(`/** A JSON value as JSON.parse would give it back (no -0, no undefined). */`);
  lines.push(`const json = <T>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<T> => arbitrary.map((v) => JSON.parse(JSON.stringify(v)) as T);`);
  lines.push(`const jsonObject = json(fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 4 }));`);
  if (ir.jsonTypes.length > 0) {
    lines.push(`/** Values of every named JSON type of the revision, by name. */`);
    lines.push(`const jsonTypes: Record<string, fc.Arbitrary<unknown>> = {};`);
    lines.push(...jsonTypeArbitraries(ir.jsonTypes));
  }
  if (ir.postcardTypes.length > 0 || ir.frames.some((f) => f.postcard)) {
    lines.push(`/** Every postcard shape of the revision, by id. */`);
    lines.push(`export const postcard: Record<string, fc.Arbitrary<unknown>> = ${postcardArbitraries(ir)};`);
  }
  lines.push("");
  const fieldArb = (f: IrField): string => {
    switch (f.type) {
      case "u8":
        return `fc.integer({ min: 0, max: ${f.max ?? "0xff"} })`;
      case "u16":
        return `fc.integer({ min: 0, max: ${f.max ?? "0xffff"} })`;
      case "u32":
        return `fc.integer({ min: 0, max: ${f.max ?? "0xffffffff"} })`;
      case "bytes":
        return "fc.uint8Array({ maxLength: 48 })";
      case "utf8":
        return `fc.string({ unit: "binary", maxLength: 24 })`;
      case "postcard":
        return postcardFieldArbitrary(f);
      case "list":
        return listArbitrary(f);
      case "u64":
        return "fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })";
      case "json": {
        const s = f.schema!;
        if (s.kind === "mcp") return s.nullable ? "fc.option(jsonObject, { nil: null })" : "jsonObject";
        if (s.kind === "mapOfString") return "json(fc.dictionary(fc.string(), fc.string(), { maxKeys: 4 }))";
        if (s.kind === "object") return "jsonObject";
        if (s.kind === "json") return `jsonTypes[${lit(s.name)}]!`;
        return "json(fc.jsonValue())";
      }
    }
  };
  lines.push(`export interface FrameUnderTest {`);
  lines.push(`  readonly id: string;`);
  lines.push(`  readonly arbitrary: fc.Arbitrary<unknown>;`);
  lines.push(`  readonly encode: (value: never) => Uint8Array;`);
  lines.push(`  readonly decode: (bytes: Uint8Array) => unknown;`);
  lines.push(`  readonly error: abstract new (...args: never[]) => Error;`);
  lines.push(`  /** Golden bytes of the frame, hex: seeds for mutation. */`);
  lines.push(`  readonly seeds: readonly string[];`);
  lines.push(`}`);
  lines.push("");
  lines.push(`export const framesUnderTest: readonly FrameUnderTest[] = [`);
  for (const frame of ir.frames) {
    const error = errorTypeOf(ir, frame.errorTypeId)!;
    let arb: string;
    if (frame.postcard) {
      arb = `postcard[${lit(frame.id)}]!`;
    } else if (frame.body) {
      arb = `fc.record({ ${frame.body.fields.map((f) => `${lit(f.name)}: ${fieldArb(f)}`).join(", ")} })`;
    } else {
      const sw = frame.switch!;
      const headerFields = frame.header!.fields.filter((h) => h.name !== sw.on);
      const variants = sw.variants.map((v) => {
        const props = [
          `${lit(DISCRIMINANT)}: fc.constant(${lit(v.name)})`,
          ...headerFields.map((h) => `${lit(h.name)}: ${fieldArb({ name: h.name, type: h.type, length: "fixed", doc: "" })}`),
          ...v.body.fields.map((f) => `${lit(f.name)}: ${fieldArb(f)}`),
        ];
        return `fc.record({ ${props.join(", ")} })`;
      });
      arb = `fc.oneof(${variants.join(", ")})`;
    }
    lines.push(`  {`);
    lines.push(`    id: ${lit(frame.id)},`);
    lines.push(`    arbitrary: ${arb},`);
    lines.push(`    encode: codec.${encodeName(frame)} as (value: never) => Uint8Array,`);
    lines.push(`    decode: codec.${decodeName(frame)},`);
    lines.push(`    error: codec.${error.name},`);
    lines.push(`    seeds: [${frame.examples.map((e) => lit(bytesToHex(e.bytes))).join(", ")}],`);
    lines.push(`  },`);
  }
  lines.push(`];`);
  return { path: `packages/codec/${testPath}`, text: lines.join("\n") + "\n" };
}
