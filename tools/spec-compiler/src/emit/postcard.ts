// Postcard in every output: the codec's types, readers and writers for named postcard types and
// postcard frames, their layout text, TypeScript literals of example values, fast-check arbitraries,
// and the language-neutral views (u64 as decimal text, bytes as hex) of vectors and the testee.
import type { CodeBlockWriter, SourceFile } from "ts-morph";
import { errorTypeOf, frameOf, postcardTypeOf, type IrErrorType, type IrField, type IrFrame, type IrRevision } from "../ir.js";
import { DISCRIMINANT, specName, type IrPostcardField, type IrPostcardShape, type IrPostcardType, type PostcardTypeRef } from "../postcard-ir.js";
import { decodeName, encodeName, lit } from "../names.js";

const RUNTIME = "runtime/index.ts";

/** What an emitter hands in to record the imports a module needs. */
export interface ImportSink {
  value(module: string, name: string): string;
  type(module: string, name: string): string;
}

/** Where things live, as the codec emitter decides it. */
export interface PostcardPlaces {
  readonly rev: string;
  readonly ir: IrRevision;
  readonly errorPath: (errorTypeId: string) => string;
}

const typeModule = (p: PostcardPlaces, id: string) => `${p.rev}/${id}.ts`;
const readName = (name: string) => `read${name}`;
const writeName = (name: string) => `write${name}`;

function namedType(ir: IrRevision, id: string): IrPostcardType {
  return postcardTypeOf(ir, id)!;
}

// ---- the codec --------------------------------------------------------------------------------

function tsType(p: PostcardPlaces, imports: ImportSink, self: string, ref: PostcardTypeRef): string {
  switch (ref.kind) {
    case "scalar":
      return ref.scalar === "u64" ? "bigint" : ref.scalar === "bool" ? "boolean" : ref.scalar === "string" ? "string" : ref.scalar === "bytes" ? "Uint8Array" : "number";
    case "option":
      return `${tsType(p, imports, self, ref.of)} | null`;
    case "vec": {
      const inner = tsType(p, imports, self, ref.of);
      return ref.of.kind === "option" ? `(${inner})[]` : `${inner}[]`;
    }
    case "ref": {
      const t = namedType(p.ir, ref.id);
      return imports.type(typeModule(p, ref.id), t.name);
    }
  }
}

function readExpr(p: PostcardPlaces, imports: ImportSink, ref: PostcardTypeRef, r: string): string {
  switch (ref.kind) {
    case "scalar":
      return ref.scalar === "string" ? `${r}.string()` : ref.scalar === "bytes" ? `${r}.byteString()` : `${r}.${ref.scalar}()`;
    case "option":
      return `(${r}.some() ? ${readExpr(p, imports, ref.of, r)} : null)`;
    case "vec":
      return `${r}.seq(($r) => ${readExpr(p, imports, ref.of, "$r")})`;
    case "ref": {
      const t = namedType(p.ir, ref.id);
      return `${imports.value(typeModule(p, ref.id), readName(t.name))}(${r})`;
    }
  }
}

function writeStatements(w: CodeBlockWriter, p: PostcardPlaces, imports: ImportSink, ref: PostcardTypeRef, expr: string, field: string, depth = 0): void {
  switch (ref.kind) {
    case "scalar":
      if (ref.scalar === "string") w.writeLine(`$w.string(${lit(field)}, ${expr});`);
      else if (ref.scalar === "bytes") w.writeLine(`$w.byteString(${lit(field)}, ${expr});`);
      else w.writeLine(`$w.${ref.scalar}(${lit(field)}, ${expr});`);
      return;
    case "option": {
      const v = `$o${depth}`;
      w.write("").block(() => {
        w.writeLine(`const ${v} = ${expr};`);
        w.write(`if ($w.some(${v}))`).block(() => writeStatements(w, p, imports, ref.of, v, field, depth + 1));
      });
      return;
    }
    case "vec": {
      const v = `$e${depth}`;
      w.write(`for (const ${v} of $w.sequence<unknown>(${lit(field)}, ${expr}))`).block(() => writeStatements(w, p, imports, ref.of, `${v} as never`, field, depth + 1));
      return;
    }
    case "ref": {
      const t = namedType(p.ir, ref.id);
      w.writeLine(`${imports.value(typeModule(p, ref.id), writeName(t.name))}($w, ${expr});`);
      return;
    }
  }
}

/** How a caller writes one element of a sequence of `ref` named `field`, for doc comments. */
function elementWriterText(p: PostcardPlaces, ref: PostcardTypeRef, field: string): string {
  switch (ref.kind) {
    case "ref":
      return `{@link ${writeName(namedType(p.ir, ref.id).name)}}`;
    case "scalar":
      return `\`$w.${ref.scalar === "bytes" ? "byteString" : ref.scalar}(${lit(field)}, …)\``;
    default:
      return `the writes {@link PostcardWriter} makes for \`${refText(ref)}\``;
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").replace(/\*\//g, "*\\/").trim();
}

/**
 * The value types, reader, writer and head writers of one shape named `name`; `exported` readers/writers
 * for named types, else `encoder` names the frame's encoder.
 */
function emitShape(file: SourceFile, imports: ImportSink, p: PostcardPlaces, self: string, name: string, doc: string, shape: IrPostcardShape, exported: boolean, frameId: string, encoder?: string): void {
  imports.type(RUNTIME, "PostcardReader");
  imports.type(RUNTIME, "PostcardWriter");
  const props = (fields: readonly IrPostcardField[]) => fields.map((f) => ({ name: f.name, type: tsType(p, imports, self, f.type), docs: [f.doc] }));
  const layout = shapeLayout(shape);
  const fullDoc = `${doc}\n\nPostcard. Layout:\n\n\`\`\`text\n${layout}\n\`\`\``;
  if (shape.kind === "struct") {
    file.addInterface({ isExported: true, name, docs: [fullDoc], properties: props(shape.fields) });
  } else {
    shape.variants.forEach((v, i) => {
      file.addInterface({
        isExported: true,
        name: `${name}${v.name}`,
        docs: [`${v.doc}\n\nVariant index \`${i}\`.`],
        properties: [{ name: DISCRIMINANT, type: lit(v.name), docs: [`Variant index \`${i}\`.${specName(shape.property)}`] }, ...props(v.fields)],
      });
    });
    file.addTypeAlias({ isExported: true, name, docs: [fullDoc], type: shape.variants.map((v) => `${name}${v.name}`).join(" | ") });
  }
  const reader = exported ? readName(name) : `$${readName(name)}`;
  const writer = exported ? writeName(name) : `$${writeName(name)}`;
  const bind = (w: CodeBlockWriter, fields: readonly IrPostcardField[]) => {
    for (const f of fields) w.writeLine(`const ${f.name} = ${readExpr(p, imports, f.type, "$r")};`);
  };
  file.addFunction({
    isExported: exported,
    name: reader,
    parameters: [{ name: "$r", type: "PostcardReader" }],
    returnType: name,
    docs: [`Reads one {@link ${name}} at the reader's position; throws \`PostcardFailure\`.`],
    statements: (w) => {
      w.writeLine("$r.enter();");
      if (shape.kind === "struct") {
        bind(w, shape.fields);
        w.writeLine("$r.leave();");
        w.writeLine(`return { ${shape.fields.map((f) => f.name).join(", ")} };`);
        return;
      }
      w.writeLine(`let $value: ${name};`);
      w.write(`switch ($r.variant(${shape.variants.length}))`).block(() => {
        shape.variants.forEach((v, i) => {
          w.write(i === shape.variants.length - 1 ? "default:" : `case ${i}:`).block(() => {
            bind(w, v.fields);
            w.writeLine(`$value = { ${[`${DISCRIMINANT}: ${lit(v.name)}`, ...v.fields.map((f) => f.name)].join(", ")} };`);
            w.writeLine("break;");
          });
        });
      });
      w.writeLine("$r.leave();");
      w.writeLine("return $value;");
    },
  });
  const encodeError = imports.value(RUNTIME, "EncodeError");
  file.addFunction({
    isExported: exported,
    name: writer,
    parameters: [
      { name: "$w", type: "PostcardWriter" },
      { name: "value", type: name },
    ],
    returnType: "void",
    docs: [`Writes one {@link ${name}}; throws \`EncodeError\` when a field cannot be written.`],
    statements: (w) => {
      w.write(`if (typeof value !== "object" || value === null)`).block(() => w.writeLine(`throw new ${encodeError}($w.frame, undefined, ${lit(`${name} must be an object`)});`));
      if (shape.kind === "struct") {
        for (const f of shape.fields) writeStatements(w, p, imports, f.type, `value.${f.name}`, f.name);
        return;
      }
      w.write(`switch (value.${DISCRIMINANT})`).block(() => {
        shape.variants.forEach((v, i) => {
          w.write(`case ${lit(v.name)}:`).block(() => {
            w.writeLine(`$w.variant(${i});`);
            for (const f of v.fields) writeStatements(w, p, imports, f.type, `value.${f.name}`, f.name);
            w.writeLine("return;");
          });
        });
        w.writeLine("default:");
        w.indent(() =>
          w.writeLine(
            `throw new ${encodeError}($w.frame, ${lit(DISCRIMINANT)}, \`unknown ${DISCRIMINANT} \${String((value as { ${DISCRIMINANT}?: unknown }).${DISCRIMINANT})}\`);`,
          ),
        );
      });
    },
  });
  // Head writers: for a struct or variant ending in a sequence, everything before the sequence's
  // elements, so a caller can stream the elements with the element writer.
  const heads = shape.kind === "struct" ? [{ type: name, variant: undefined, index: 0, fields: shape.fields }] : shape.variants.map((v, i) => ({ type: `${name}${v.name}`, variant: v.name, index: i, fields: v.fields }));
  for (const head of heads) {
    const last = head.fields[head.fields.length - 1];
    if (last?.type.kind !== "vec") continue;
    const omitted = [...(head.variant === undefined ? [] : [DISCRIMINANT]), last.name].map(lit).join(" | ");
    const before = [...(head.variant === undefined ? [] : ["its variant index"]), ...(head.fields.length > 1 ? [`every field before \`${last.name}\``] : [])];
    const what = [before.join(", "), `\`${last.name}\`'s count`].filter(Boolean).join(", then ");
    file.addFunction({
      isExported: true,
      name: `${writeName(head.type)}Head`,
      parameters: [
        { name: "$w", type: "PostcardWriter" },
        { name: "head", type: `Omit<${head.type}, ${omitted}>` },
        { name: "count", type: "number" },
      ],
      returnType: "void",
      docs: [
        `Writes the head of one {@link ${head.type}}: ${what}. ` +
          `The caller then writes exactly \`count\` elements with ${elementWriterText(p, last.type.of, last.name)}, and the bytes equal ` +
          `${exported ? `what {@link ${writer}} writes for the whole value` : `the whole value's encoding ({@link ${encoder}})`}, so a long sequence is written without holding it.\n\n` +
          `Throws \`EncodeError\` as the whole writer does for the same field, or when \`count\` is not a whole number from 0 to 9007199254740991.`,
      ],
      statements: (w) => {
        w.write(`if (typeof head !== "object" || head === null)`).block(() => w.writeLine(`throw new ${encodeError}($w.frame, undefined, ${lit(`${head.type} head must be an object`)});`));
        if (head.variant !== undefined) w.writeLine(`$w.variant(${head.index});`);
        for (const f of head.fields.slice(0, -1)) writeStatements(w, p, imports, f.type, `head.${f.name}`, f.name);
        w.writeLine(`$w.count(${lit(last.name)}, count);`);
      },
    });
  }
  void frameId;
}

/** A named postcard type's module: its value types, reader and writer. */
export function emitPostcardTypeModule(file: SourceFile, imports: ImportSink, p: PostcardPlaces, type: IrPostcardType): void {
  emitShape(file, imports, p, typeModule(p, type.id), type.name, `${type.doc}\n\nSpec: postcard type \`${type.id}\` (revision ${p.ir.revision}).`, type.shape, true, type.id);
}

/** A postcard frame: its value types, then `decode…`/`encode…` as every frame has. */
export function emitPostcardFrame(file: SourceFile, imports: ImportSink, p: PostcardPlaces, frame: IrFrame, errorType: IrErrorType): void {
  const self = `${p.rev}/${frame.id}.ts`;
  emitShape(file, imports, p, self, frame.name, `${frame.doc}\n\nSpec: \`${frame.id}\` (revision ${p.ir.revision}).`, frame.postcard!, false, frame.id, encodeName(frame));
  const errorClass = imports.value(p.errorPath(errorType.id), errorType.name);
  imports.type(RUNTIME, "DecodeOptions");
  const reader = imports.value(RUNTIME, "PostcardReader");
  const failure = imports.value(RUNTIME, "PostcardFailure");
  const writer = imports.value(RUNTIME, "PostcardWriter");
  file.addFunction({
    isExported: true,
    name: decodeName(frame),
    parameters: [
      { name: "bytes", type: "Uint8Array" },
      { name: "options", type: "DecodeOptions", hasQuestionToken: true },
    ],
    returnType: frame.name,
    docs: [
      `Reads one {@link ${frame.name}} from \`bytes\` as postcard's \`from_bytes\` does: bytes after a complete value are ignored.\n\n` +
        `Throws {@link ${errorType.name}} and nothing else when the bytes are not one; never reads outside them. ` +
        `Byte strings of the result are views into \`bytes\` (no copy).\n\nThe error's message is exactly one of:\n` +
        errorType.variants.map((v) => `- \`${v.name}\`: \`${v.message}\``).join("\n"),
    ],
    statements: (w) => {
      w.writeLine("void options;");
      w.write("try").block(() => w.writeLine(`return $${readName(frame.name)}(new ${reader}(bytes, 0, bytes.length));`));
      w.write(" catch ($problem)").block(() => {
        w.write(`if ($problem instanceof ${failure})`).block(() => {
          w.writeLine("const $variant = $problem.variant;");
          w.write("switch ($variant)").block(() => {
            w.writeLine(`case "UnknownVariant":`);
            w.indent(() => w.writeLine(`throw new ${errorClass}({ variant: $variant, index: $problem.index, count: $problem.count });`));
            w.writeLine(`case "TooDeep":`);
            w.indent(() => w.writeLine(`throw new ${errorClass}({ variant: $variant, limit: $problem.index });`));
            w.writeLine("default:");
            w.indent(() => w.writeLine(`throw new ${errorClass}({ variant: $variant });`));
          });
        });
        w.writeLine("throw $problem;");
      });
    },
  });
  file.addFunction({
    isExported: true,
    name: encodeName(frame),
    parameters: [{ name: "value", type: frame.name }],
    returnType: "Uint8Array",
    docs: [`Writes one {@link ${frame.name}} as postcard, exactly as {@link ${decodeName(frame)}} reads it (shortest varints).\n\nThrows {@link EncodeError} when a field cannot be written.`],
    statements: (w) => {
      w.writeLine(`const $w = new ${writer}(${lit(frame.id)});`);
      w.writeLine(`$${writeName(frame.name)}($w, value);`);
      w.writeLine("return $w.finish();");
    },
  });
}

/** Statements reading a `postcard` body field from `range`, raising the field's `invalid` variant around the inner error. */
export function emitPostcardFieldDecode(w: CodeBlockWriter, imports: ImportSink, p: PostcardPlaces, f: IrField, range: string, raise: (variant: string, fields: string) => string): void {
  const target = frameOf(p.ir, f.postcard!)!;
  const inner = errorTypeOf(p.ir, target.errorTypeId)!;
  const module = `${p.rev}/${target.id}.ts`;
  const innerClass = imports.value(p.errorPath(inner.id), inner.name);
  w.writeLine(`let ${f.name}: ${imports.type(module, target.name)};`);
  w.write("try").block(() => w.writeLine(`${f.name} = ${imports.value(module, decodeName(target))}(bytes.subarray(${range}));`));
  w.write(" catch ($problem)").block(() => {
    w.writeLine(`if ($problem instanceof ${innerClass}) throw ${raise(f.invalid!, "source: $problem")};`);
    w.writeLine("throw $problem;");
  });
}

/** The statement serializing a `postcard` body field into `$<name>`. */
export function postcardFieldEncode(imports: ImportSink, p: PostcardPlaces, f: IrField): string {
  const target = frameOf(p.ir, f.postcard!)!;
  return `const $${f.name} = ${imports.value(`${p.rev}/${target.id}.ts`, encodeName(target))}(value.${f.name});`;
}

export function postcardFieldType(imports: ImportSink, p: PostcardPlaces, f: IrField): string {
  const target = frameOf(p.ir, f.postcard!)!;
  return imports.type(`${p.rev}/${target.id}.ts`, target.name);
}

// ---- layouts ------------------------------------------------------------------------------------

export function refText(ref: PostcardTypeRef): string {
  switch (ref.kind) {
    case "scalar":
      return ref.scalar === "u8" ? "u8" : ref.scalar === "bool" ? "bool (00 or 01)" : ref.scalar === "string" ? "string (varint length, UTF-8)" : ref.scalar === "bytes" ? "bytes (varint length, bytes)" : `${ref.scalar} varint`;
    case "option":
      return `option (00, or 01 then ${refText(ref.of)})`;
    case "vec":
      return `sequence (varint count, then each ${refText(ref.of)})`;
    case "ref":
      return ref.name;
  }
}

/** One line per variant (or one for a struct): the bytes of the shape in bracket notation. */
export function shapeLayout(shape: IrPostcardShape): string {
  const fields = (list: readonly IrPostcardField[]) => list.map((f) => `[${f.name}: ${refText(f.type)}]`).join("");
  if (shape.kind === "struct") return fields(shape.fields);
  return shape.variants.map((v, i) => `[${i}: variant index, varint]${fields(v.fields)}   ${v.name}`).join("\n");
}

// ---- examples, views and arbitraries -------------------------------------------------------------

/** The type of a value's fields, for a frame whose values hold postcard: per variant ("" for plain), per field. */
export type ViewType = string | { readonly option: ViewType } | { readonly vec: ViewType } | { readonly ref: string };

export function viewTypeOf(ref: PostcardTypeRef): ViewType {
  switch (ref.kind) {
    case "scalar":
      return ref.scalar;
    case "option":
      return { option: viewTypeOf(ref.of) };
    case "vec":
      return { vec: viewTypeOf(ref.of) };
    case "ref":
      return { ref: ref.id };
  }
}

const shapesOf = new WeakMap<IrRevision, Record<string, unknown>>();

/** The table of named shapes (named postcard types and postcard frames) views and literals walk; built once per revision (read, never changed). */
export function viewShapes(ir: IrRevision): Record<string, unknown> {
  const known = shapesOf.get(ir);
  if (known) return known;
  const out: Record<string, unknown> = {};
  const shape = (s: IrPostcardShape) =>
    s.kind === "struct"
      ? { fields: s.fields.map((f) => [f.name, viewTypeOf(f.type)]) }
      : { property: s.property, variants: Object.fromEntries(s.variants.map((v) => [v.name, v.fields.map((f) => [f.name, viewTypeOf(f.type)])])) };
  for (const t of ir.postcardTypes) out[t.id] = shape(t.shape);
  for (const f of ir.frames) if (f.postcard) out[f.id] = shape(f.postcard);
  shapesOf.set(ir, out);
  return out;
}

/** Whether a frame's values hold anything postcard (so views and literals must walk them). */
export function hasPostcard(frame: IrFrame): boolean {
  if (frame.postcard) return true;
  const fields = [...(frame.body?.fields ?? []), ...(frame.switch?.variants.flatMap((v) => v.body.fields) ?? [])];
  return fields.some((f) => f.type === "postcard" || f.type === "u64");
}

/** The root view type of a frame's value: a ref to itself for a postcard frame, else its fields. */
export function frameViewFields(frame: IrFrame): Record<string, Record<string, ViewType>> {
  const of = (fields: readonly IrField[]) =>
    Object.fromEntries(fields.filter((f) => f.type === "postcard" || f.type === "u64").map((f) => [f.name, (f.type === "u64" ? "u64" : { ref: f.postcard! }) as ViewType]));
  if (frame.body) return { "": of(frame.body.fields) };
  if (frame.switch) return Object.fromEntries(frame.switch.variants.map((v) => [v.name, of(v.body.fields)]));
  return {};
}

type Shapes = Record<string, any>;

/**
 * Walks a value along a view type, applying `leaf` to each scalar. The value names each enum's variant
 * in the spec's member (a view, as examples and vectors write it); `asValue` writes it under
 * {@link DISCRIMINANT} instead, as the codec's values carry it, in the same place.
 */
function walk(shapes: Shapes, type: ViewType, value: unknown, leaf: (scalar: string, value: unknown) => unknown, asValue = false): unknown {
  if (typeof type === "string") return leaf(type, value);
  if ("option" in type) return value === null || value === undefined ? null : walk(shapes, type.option, value, leaf, asValue);
  if ("vec" in type) return (value as unknown[]).map((v) => walk(shapes, type.vec, v, leaf, asValue));
  const shape = shapes[type.ref];
  const object = value as Record<string, unknown>;
  const fields: [string, ViewType][] = shape.fields ?? shape.variants[object[shape.property] as string] ?? [];
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(object)) {
    const field = fields.find(([name]) => name === key);
    out[asValue && shape.variants && key === shape.property ? DISCRIMINANT : key] = field ? walk(shapes, field[1], v, leaf, asValue) : v;
  }
  return out;
}

/** A view (u64 as decimal text or a number) as a TypeScript literal for generated tests: the codec's value, enums named under {@link DISCRIMINANT}. */
export function postcardLiteral(ir: IrRevision, type: ViewType, value: unknown): string {
  const marks = new Map<string, string>();
  let n = 0;
  const marked = walk(viewShapes(ir), type, value, (scalar, v) => {
    if (scalar === "u64") {
      const key = `@@${n++}@@`;
      marks.set(key, `${BigInt(v as string | number).toString()}n`);
      return key;
    }
    if (scalar === "bytes") {
      const key = `@@${n++}@@`;
      marks.set(key, `fromHex(${lit(String(v))})`);
      return key;
    }
    return v;
  }, true);
  let text = JSON.stringify(marked);
  for (const [key, expr] of marks) text = text.replace(lit(key), expr);
  return text;
}

/** A view as vectors carry it: u64 always as decimal text. */
export function normalizeView(ir: IrRevision, type: ViewType, value: unknown): unknown {
  return walk(viewShapes(ir), type, value, (scalar, v) => (scalar === "u64" ? BigInt(v as string | number).toString() : v));
}

/** fast-check source for one view type; `tie` names the letrec's tie function. */
function arbitraryOf(type: ViewType): string {
  if (typeof type === "string") {
    switch (type) {
      case "u8":
        return "fc.integer({ min: 0, max: 0xff })";
      case "u16":
        return "fc.integer({ min: 0, max: 0xffff })";
      case "u32":
        return "fc.integer({ min: 0, max: 0xffffffff })";
      case "u64":
        return "fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })";
      case "bool":
        return "fc.boolean()";
      case "string":
        return `fc.string({ unit: "binary", maxLength: 12 })`;
      default:
        return "fc.uint8Array({ maxLength: 16 })";
    }
  }
  if ("option" in type) return `fc.option(${arbitraryOf(type.option)}, { nil: null })`;
  if ("vec" in type) return `fc.array(${arbitraryOf(type.vec)}, { maxLength: 3 })`;
  return `tie(${lit(type.ref)})`;
}

/** A `fc.letrec` over every named shape; variants without recursion first, so depth limits end on them. */
export function postcardArbitraries(ir: IrRevision): string {
  const shapes = viewShapes(ir) as Shapes;
  const recursive = (fields: [string, ViewType][]) => JSON.stringify(fields).includes('"ref"');
  const entries = Object.entries(shapes).map(([id, shape]) => {
    const record = (fields: [string, ViewType][], extra?: string) =>
      `fc.record({ ${[...(extra ? [extra] : []), ...fields.map(([name, t]) => `${lit(name)}: ${arbitraryOf(t)}`)].join(", ")} })`;
    if (shape.fields) return `${lit(id)}: ${record(shape.fields)}`;
    const variants = Object.entries(shape.variants as Record<string, [string, ViewType][]>).sort(([, a], [, b]) => Number(recursive(a)) - Number(recursive(b)));
    return `${lit(id)}: fc.oneof({ maxDepth: 3, depthIdentifier: ${lit(id)} }, ${variants.map(([name, fields]) => record(fields, `${lit(DISCRIMINANT)}: fc.constant(${lit(name)})`)).join(", ")})`;
  });
  return `fc.letrec((tie) => ({ ${entries.join(", ")} }))`;
}

/** The arbitrary of a body field of type `postcard`. */
export function postcardFieldArbitrary(f: IrField): string {
  return `postcard[${lit(f.postcard!)}]!`;
}

// ---- docs ----------------------------------------------------------------------------------------

/** The reference text of a postcard frame: its shape, then every named type it reaches, then the encoding rules. */
export function postcardDocs(ir: IrRevision, frame: IrFrame, code: (text: string) => string, block: (text: string) => string): string {
  const parts: string[] = [];
  const fieldLines = (fields: readonly IrPostcardField[]) => fields.map((f) => `- **${code(f.name)}** (${code(refText(f.type))}). ${f.doc}`).join("\n");
  const shapeText = (shape: IrPostcardShape) =>
    shape.kind === "struct"
      ? fieldLines(shape.fields)
      : shape.variants.map((v, i) => `**${code(v.name)}** (variant index ${code(String(i))}, ${code(`${DISCRIMINANT}: "${v.name}"`)} in a decoded value${shape.property === DISCRIMINANT ? "" : `, ${code(`${shape.property}: "${v.name}"`)} in a conformance view`}). ${v.doc}\n\n${fieldLines(v.fields) || "Carries nothing."}`).join("\n\n");
  parts.push(shapeText(frame.postcard!));
  const reached: IrPostcardType[] = [];
  const visit = (ref: PostcardTypeRef) => {
    if (ref.kind === "option" || ref.kind === "vec") return visit(ref.of);
    if (ref.kind !== "ref" || reached.some((t) => t.id === ref.id)) return;
    const t = namedType(ir, ref.id);
    reached.push(t);
    const s = t.shape;
    for (const f of s.kind === "struct" ? s.fields : s.variants.flatMap((v) => v.fields)) visit(f.type);
  };
  const s = frame.postcard!;
  for (const f of s.kind === "struct" ? s.fields : s.variants.flatMap((v) => v.fields)) visit(f.type);
  for (const t of reached) parts.push(`### ${t.name}\n\n${t.doc}\n\n${block(shapeLayout(t.shape))}\n\n${shapeText(t.shape)}`);
  parts.push(
    "### Encoding\n\n" +
      [
        "- `u16`, `u32`, `u64` and every length, count and variant index: unsigned LEB128 varint, seven bits a byte, least significant group first, the high bit set on every byte but the last (at most 3, 5 and 10 bytes; the last byte may not overflow the type). The shortest form is written; a longer one within the limits is read.",
        "- `u8`: one byte. `bool`: one byte, `00` or `01`. An option: `00` for none, or `01` then the value.",
        "- A string: its byte length, then UTF-8. A sequence: its count, then each element. A struct: its fields in order, no names. An enum: its variant index, then the variant's fields.",
        "- A u64 is a `bigint` in TypeScript and decimal text in a conformance view.",
      ].join("\n"),
  );
  return parts.join("\n\n");
}
