// Emits @diverge/codec's generated modules for one revision: one module per frame (value types,
// tag constants, decoder, encoder, and the frame's own error type), shared error modules, the MCP
// type names, and the revision's index.
import { StructureKind, VariableDeclarationKind, type CodeBlockWriter, type SourceFile } from "ts-morph";
import { DISCRIMINANT, INT_SIZE, specName, type IrBody, type IrErrorType, type IrErrorVariant, type IrField, type IrFrame, type IrRevision } from "../ir.js";
import { decodeName, describeName, detailName, encodeName, errorModule, frameModule, importPath, lit, tagsName, variantTypeName } from "../names.js";
import { banner, newProject, printTs, type GeneratedFile } from "./project.js";
import { layoutOf, variantLayout } from "./layout.js";
import { mcpTypeSource } from "./mcp-types.js";
import { checkName, emitJsonTypes } from "./json-types.js";
import { emitListDecode, emitListPrepare, emitListWrite, entryType, intCheck, intReader, intWriter } from "./list.js";
import { emitPostcardFieldDecode, emitPostcardFrame, emitPostcardTypeModule, postcardFieldEncode, postcardFieldType, type PostcardPlaces } from "./postcard.js";

const RUNTIME = "runtime/index.ts";

/** Collects the imports one generated module needs, by module (relative to the codec's src/). */
class Imports {
  private readonly values = new Map<string, Set<string>>();
  private readonly types = new Map<string, Set<string>>();
  constructor(private readonly self: string) {}
  value(module: string, name: string): string {
    if (module !== this.self) getSet(this.values, module).add(name);
    return name;
  }
  type(module: string, name: string): string {
    if (module !== this.self) getSet(this.types, module).add(name);
    return name;
  }
  apply(file: SourceFile): void {
    const modules = [...new Set([...this.values.keys(), ...this.types.keys()])].sort();
    for (const module of modules) {
      const values = [...(this.values.get(module) ?? [])].sort();
      const types = [...(this.types.get(module) ?? [])].filter((t) => !values.includes(t)).sort();
      file.addImportDeclaration({
        moduleSpecifier: importPath(this.self, module),
        namedImports: [...values.map((name) => ({ name })), ...types.map((name) => ({ name, isTypeOnly: true }))],
      });
    }
  }
}

function getSet<K, V>(map: Map<K, Set<V>>, key: K): Set<V> {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  return set;
}

export function emitCodec(ir: IrRevision, compilerVersion: string): GeneratedFile[] {
  const root = `packages/codec/src`;
  const rev = `gen/${ir.revision}`;
  const project = newProject();
  const head = banner(ir, compilerVersion);
  const out: GeneratedFile[] = [];
  const errorById = new Map(ir.errorTypes.map((e) => [e.id, e]));
  const errorPath = (id: string) => `${rev}/${errorModule(ir, errorById.get(id)!)}`;
  const frameById = new Map(ir.frames.map((f) => [f.id, f]));
  const places: PostcardPlaces = { rev, ir, errorPath };
  const sharedErrors = ir.errorTypes.filter((error) => error.usedBy.length !== 1);

  // The module each step below writes into, in order: a module is printed, and dropped from the
  // project, right after the last step that writes into it. The project then holds a few syntax
  // trees at a time, not the whole codec's (which made generating a large spec grow faster than the spec).
  const plan = [
    ...ir.postcardTypes.map((t) => `${rev}/${t.id}.ts`),
    ...ir.frames.map((frame) => `${rev}/${frameModule(frame)}`),
    ...sharedErrors.map((error) => errorPath(error.id)),
    `${rev}/mcp-types.ts`,
    `${rev}/index.ts`,
  ];
  const lastStep = new Map(plan.map((path, step) => [path, step]));
  const modules = new Map<string, { file: SourceFile; imports: Imports }>();
  const printed = new Map<string, string>();
  let step = 0;
  const moduleFor = (path: string) => {
    if (plan[step] !== path) throw new Error(`emitCodec: step ${step} writes ${path}, planned ${plan[step]}`);
    let m = modules.get(path);
    if (!m) {
      if (printed.has(path)) throw new Error(`emitCodec: ${path} was written after it was printed`);
      m = { file: project.createSourceFile(`/${path}`, "", { overwrite: true }), imports: new Imports(path) };
      modules.set(path, m);
    }
    return m;
  };
  /** Ends the step: prints its module when no later step writes into it. */
  const stepDone = () => {
    const path = plan[step]!;
    if (lastStep.get(path) === step) {
      const m = modules.get(path)!;
      m.imports.apply(m.file);
      printed.set(path, printTs(m.file, head));
      modules.delete(path);
      project.removeSourceFile(m.file);
    }
    step++;
  };
  for (const t of ir.postcardTypes) {
    const m = moduleFor(`${rev}/${t.id}.ts`);
    emitPostcardTypeModule(m.file, m.imports, places, t);
    stepDone();
  }

  // Error types: shared ones get their own module, the rest are written into their frame's module
  // right after the frame, so what can go wrong reading a frame sits beside it.
  for (const frame of ir.frames) {
    const m = moduleFor(`${rev}/${frameModule(frame)}`);
    emitFrame(m.file, m.imports, frame);
    const own = errorById.get(frame.errorTypeId)!;
    if (own.usedBy.length === 1) emitError(m.file, m.imports, own);
    stepDone();
  }
  for (const error of sharedErrors) {
    const m = moduleFor(errorPath(error.id));
    emitError(m.file, m.imports, error);
    stepDone();
  }
  emitMcpTypes(moduleFor(`${rev}/mcp-types.ts`).file, ir);
  stepDone();
  emitIndex(moduleFor(`${rev}/index.ts`).file, ir, errorPath);
  stepDone();

  for (const [path, text] of [...printed.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    out.push({ path: `${root}/${path}`, text });
  }
  const jsonTypes = emitJsonTypes(ir, compilerVersion);
  if (jsonTypes) out.push(jsonTypes);
  return out;

  // -------------------------------------------------------------------------------------------

  function emitError(file: SourceFile, imports: Imports, error: IrErrorType): void {
    imports.value(RUNTIME, "DecodeError");
    const detail = detailName(error);
    file.addTypeAlias({
      isExported: true,
      name: detail,
      docs: [`The variants of {@link ${error.name}}: which way reading failed, with what the spec says each carries.`],
      type: (w) => {
        for (const v of error.variants) {
          w.writeLine(`| {`);
          w.indent(() => {
            w.writeLine(`/** ${oneLine(v.doc)} */`);
            w.writeLine(`readonly variant: ${lit(v.name)};`);
            for (const f of v.fields) {
              w.writeLine(`/** ${oneLine(f.doc)} */`);
              w.writeLine(`readonly ${f.name}: ${errorFieldType(imports, f.type, f.errorTypeId)};`);
            }
          });
          w.writeLine(`}`);
        }
      },
    });
    file.addFunction({
      name: describeName(error),
      parameters: [{ name: "detail", type: detail }],
      returnType: "string",
      docs: ["The spec's exact text for each variant."],
      statements: (w) => {
        w.write("switch (detail.variant)").block(() => {
          for (const v of error.variants) {
            w.writeLine(`case ${lit(v.name)}:`);
            w.indent(() => w.writeLine(`return ${messageTemplate(v.message)};`));
          }
        });
      },
    });
    const hasSource = error.variants.some((v) => v.fields.some((f) => f.type === "error"));
    file.addClass({
      isExported: true,
      name: error.name,
      extends: `DecodeError<${detail}>`,
      docs: [
        `${error.doc}\n\nThe message of each variant is exactly the spec's text; \`detail\` says which variant it is and carries its fields.` +
          (error.variants.some((v) => v.fields.some((f) => f.redacted)) ? " A redacted reason never contains a byte of the input." : ""),
      ],
      properties: [{ name: "name", hasOverrideKeyword: true, isReadonly: true, initializer: lit(error.name) }],
      ctors: [
        {
          parameters: [{ name: "detail", type: detail }],
          statements: hasSource
            ? `super(detail, ${describeName(error)}(detail), "source" in detail ? detail.source : undefined);`
            : `super(detail, ${describeName(error)}(detail));`,
        },
      ],
    });
  }

  function errorFieldType(imports: Imports, type: string, errorTypeId?: string): string {
    if (type === "reason") return "string";
    if (type === "error") {
      const inner = errorById.get(errorTypeId!)!;
      return imports.value(errorPath(inner.id), inner.name);
    }
    return "number";
  }

  function emitFrame(file: SourceFile, imports: Imports, frame: IrFrame): void {
    const errorType = errorById.get(frame.errorTypeId)!;
    if (frame.postcard) return emitPostcardFrame(file, imports, places, frame, errorType);
    const errorClass = imports.value(errorPath(errorType.id), errorType.name);
    imports.type(RUNTIME, "DecodeOptions");
    const layout = layoutOf(frame);
    const frameDoc =
      `${frame.doc}\n\nSpec: \`${frame.id}\` (revision ${ir.revision}).` + (layout ? `\n\n\`\`\`text\n${layout}\n\`\`\`` : "");

    // Value types.
    if (frame.switch) {
      const sw = frame.switch;
      const headerFields = frame.header!.fields.filter((h) => h.name !== sw.on);
      file.addVariableStatement({
        isExported: true,
        declarationKind: VariableDeclarationKind.Const,
        docs: [`The tag of each variant of {@link ${frame.name}}, as the \`${sw.on}\` byte carries it.`],
        declarations: [
          {
            name: tagsName(frame),
            initializer: (w) => {
              w.write("{").indent(() => {
                for (const v of sw.variants) w.writeLine(`${v.name}: ${v.tag},`);
              });
              w.write("} as const");
            },
          },
        ],
      });
      for (const v of sw.variants) {
        file.addInterface({
          isExported: true,
          name: variantTypeName(frame, v.name),
          docs: [`${v.doc}\n\nTag \`${v.tag}\`. Layout: \`${variantLayout(frame, v)}\``],
          properties: [
            { name: DISCRIMINANT, type: lit(v.name), docs: [`Tag \`${v.tag}\`.${specName(sw.property)}`] },
            ...headerFields.map((h) => ({ name: h.name, type: "number", docs: [h.doc] })),
            ...v.body.fields.map((f) => ({ name: f.name, type: fieldType(imports, f), docs: [f.doc] })),
          ],
        });
      }
      file.addTypeAlias({
        isExported: true,
        name: frame.name,
        docs: [frameDoc],
        type: sw.variants.map((v) => variantTypeName(frame, v.name)).join(" | "),
      });
    } else {
      file.addInterface({
        isExported: true,
        name: frame.name,
        docs: [frameDoc],
        properties: frame.body!.fields.map((f) => ({ name: f.name, type: fieldType(imports, f), docs: [f.doc] })),
      });
    }

    // Decoder.
    file.addFunction({
      isExported: true,
      name: decodeName(frame),
      parameters: [
        { name: "bytes", type: "Uint8Array" },
        { name: "options", type: "DecodeOptions", hasQuestionToken: true },
      ],
      returnType: frame.name,
      docs: [
        `Reads one {@link ${frame.name}} from \`bytes\`: ${oneLine(frame.doc)}\n\n` +
          `Throws {@link ${errorType.name}} and nothing else when the bytes are not one; never reads outside them. ` +
          `Byte fields of the result are views into \`bytes\` (no copy): copy them before reusing the buffer.` +
          `\n\nThe error's message is exactly one of:\n` +
          errorType.variants.map((v) => `- \`${v.name}\`: ${messageDoc(v, (id) => errorById.get(id)!.name)}`).join("\n") +
          (frame.malformed ? `\n\n${frame.malformed}` : ""),
      ],
      statements: (w) => {
        w.writeLine("const $end = bytes.length;");
        if (frame.switch) {
          const h = frame.header!;
          const size = h.fields.reduce((n, f) => n + INT_SIZE[f.type], 0);
          w.writeLine(`if ($end < ${size}) throw new ${errorClass}({ variant: ${lit(h.truncated)} });`);
          let at = 0;
          for (const f of h.fields) {
            w.writeLine(`const ${f.name} = ${readInt(imports, f.type, String(at))};`);
            at += INT_SIZE[f.type];
          }
          const sw = frame.switch;
          if (sw.variants.some((v) => v.body.fields.length > 0)) w.writeLine(`let $at = ${at};`);
          const headerFields = h.fields.filter((f) => f.name !== sw.on).map((f) => f.name);
          // The variants that read text or JSON, if any, are read by a second function: see readsOutOfLine.
          const outOfLine = sw.variants.some((v) => readsOutOfLine(v.body));
          w.write(`switch (${sw.on})`).block(() => {
            for (const v of sw.variants) {
              if (outOfLine && readsOutOfLine(v.body)) continue;
              w.write(`case ${v.tag}:`).block(() => {
                const names = emitBodyDecode(w, imports, v.body, errorClass);
                const props = [`${DISCRIMINANT}: ${lit(v.name)}`, ...headerFields, ...names];
                w.writeLine(`return { ${props.join(", ")} };`);
              });
            }
            w.writeLine("default:");
            w.indent(() =>
              w.writeLine(
                outOfLine
                  ? `return ${restDecodeName(frame)}(bytes, $at, $end, ${[sw.on, ...headerFields, "options"].join(", ")});`
                  : `throw new ${errorClass}({ variant: ${lit(sw.unknown)}, ${sw.on} });`,
              ),
            );
          });
        } else {
          w.writeLine(frame.body!.fields.length > 0 ? "let $at = 0;" : "");
          const names = emitBodyDecode(w, imports, frame.body!, errorClass);
          w.writeLine(`return { ${names.join(", ")} };`);
        }
      },
    });
    // The variants that read text or JSON, out of line: see readsOutOfLine.
    if (frame.switch && frame.switch.variants.some((v) => readsOutOfLine(v.body))) {
      const sw = frame.switch;
      const headerFields = frame.header!.fields.filter((f) => f.name !== sw.on).map((f) => f.name);
      file.addFunction({
        name: restDecodeName(frame),
        parameters: [
          { name: "bytes", type: "Uint8Array" },
          { name: "$at", type: "number" },
          { name: "$end", type: "number" },
          ...[sw.on, ...headerFields].map((name) => ({ name, type: "number" })),
          { name: "options", type: "DecodeOptions | undefined" },
        ],
        returnType: frame.name,
        docs: [`The variants of {@link ${decodeName(frame)}} that read text or JSON, and unknown ones; from \`$at\` on.`],
        statements: (w) => {
          w.write(`switch (${sw.on})`).block(() => {
            for (const v of sw.variants.filter((variant) => readsOutOfLine(variant.body))) {
              w.write(`case ${v.tag}:`).block(() => {
                const names = emitBodyDecode(w, imports, v.body, errorClass);
                const props = [`${DISCRIMINANT}: ${lit(v.name)}`, ...headerFields, ...names];
                w.writeLine(`return { ${props.join(", ")} };`);
              });
            }
            w.writeLine("default:");
            w.indent(() => w.writeLine(`throw new ${errorClass}({ variant: ${lit(sw.unknown)}, ${sw.on} });`));
          });
        },
      });
    }

    // Encoder.
    const frameLit = lit(frame.id);
    file.addFunction({
      isExported: true,
      name: encodeName(frame),
      parameters: [{ name: "value", type: frame.name }],
      returnType: "Uint8Array",
      docs: [
        `Writes one {@link ${frame.name}} as bytes, exactly as {@link ${decodeName(frame)}} reads them.\n\n` +
          `Throws {@link EncodeError} when a field cannot be written (an integer out of range, a length over its prefix).`,
      ],
      statements: (w) => {
        imports.value(RUNTIME, "EncodeError");
        if (frame.switch) {
          const sw = frame.switch;
          // Each variant is written by a function of its own, so the dispatch stays small enough for V8
          // to inline into its caller, and each variant's writer into the dispatch (see readsOutOfLine).
          w.write(`switch (value.${DISCRIMINANT})`).block(() => {
            for (const v of sw.variants) {
              w.write(`case ${lit(v.name)}:`).block(() => w.writeLine(`return ${variantEncodeName(frame, v.name)}(value);`));
            }
            w.writeLine("default:");
            w.indent(() =>
              w.writeLine(
                `throw new EncodeError(${frameLit}, ${lit(DISCRIMINANT)}, \`unknown ${DISCRIMINANT} \${String((value as { ${DISCRIMINANT}?: unknown }).${DISCRIMINANT})}\`);`,
              ),
            );
          });
        } else {
          const tail = emitJsonTailPrepare(w, imports, frame.body!, frameLit, 0);
          if (!tail) {
            const size = emitBodyPrepare(w, imports, frame.body!, frameLit);
            w.writeLine(`const $out = new Uint8Array(${size.length ? size.join(" + ") : "0"});`);
          }
          const written = tail ?? frame.body!;
          if (written.fields.length > 0) w.writeLine("let $at = 0;");
          emitBodyWrite(w, imports, written);
          w.writeLine("return $out;");
        }
      },
    });
    if (frame.switch) {
      const sw = frame.switch;
      const h = frame.header!;
      const headerSize = h.fields.reduce((n, f) => n + INT_SIZE[f.type], 0);
      for (const v of sw.variants) {
        file.addFunction({
          name: variantEncodeName(frame, v.name),
          parameters: [{ name: "value", type: variantTypeName(frame, v.name) }],
          returnType: "Uint8Array",
          docs: [`The ${lit(v.name)} variant of {@link ${encodeName(frame)}}.`],
          statements: (w) => {
            const headerInts = h.fields.filter((f) => f.name !== sw.on);
            for (const f of headerInts) w.writeLine(`const $${f.name} = ${imports.value(RUNTIME, "checkInt")}(${frameLit}, ${lit(f.name)}, ${lit(f.type)}, value.${f.name});`);
            const tail = emitJsonTailPrepare(w, imports, v.body, frameLit, headerSize);
            if (!tail) {
              const size = emitBodyPrepare(w, imports, v.body, frameLit);
              w.writeLine(`const $out = new Uint8Array(${[String(headerSize), ...size].join(" + ")});`);
            }
            let at = 0;
            for (const f of h.fields) {
              const expr = f.name === sw.on ? String(v.tag) : `$${f.name}`;
              w.writeLine(writeInt(imports, f.type, String(at), expr));
              at += INT_SIZE[f.type];
            }
            const written = tail ?? v.body;
            if (written.fields.length > 0) w.writeLine(`let $at = ${at};`);
            emitBodyWrite(w, imports, written);
            w.writeLine("return $out;");
          },
        });
      }
    }
  }

  function variantEncodeName(frame: IrFrame, variant: string): string {
    return `$${encodeName(frame)}${variant}`;
  }

  function fieldType(imports: Imports, f: IrField): string {
    switch (f.type) {
      case "u8":
      case "u16":
      case "u32":
        return "number";
      case "u64":
        return "bigint";
      case "list":
        return entryType(f);
      case "bytes":
        return "Uint8Array";
      case "utf8":
        return "string";
      case "postcard":
        return postcardFieldType(imports, places, f);
      case "json": {
        const s = f.schema!;
        if (s.kind === "mcp") return imports.type(`${rev}/mcp-types.ts`, s.name) + (s.nullable ? " | null" : "");
        if (s.kind === "mapOfString") return "Record<string, string>";
        if (s.kind === "object") return "Record<string, unknown>";
        if (s.kind === "json") return imports.type(`${rev}/json-types.ts`, s.name);
        return "unknown";
      }
    }
  }

  /** Writes the statements that read a body starting at `$at`; returns the names it binds. */
  function emitBodyDecode(w: CodeBlockWriter, imports: Imports, body: IrBody, outerClass: string): string[] {
    const innerType = errorById.get(body.errorTypeId)!;
    const innerClass = body.nested ? imports.value(errorPath(innerType.id), innerType.name) : outerClass;
    const raise = (variant: string, fields = "") => {
      const inner = `new ${innerClass}({ variant: ${lit(variant)}${fields ? `, ${fields}` : ""} })`;
      return body.nested ? `new ${outerClass}({ variant: ${lit(body.nested.invalid)}, source: ${inner} })` : inner;
    };
    const fixed = body.fields.reduce((n, f) => n + (f.length === "fixed" ? INT_SIZE[f.type as keyof typeof INT_SIZE] : 0), 0);
    if (body.exact) w.writeLine(`if ($end - $at !== ${fixed}) throw ${raise(body.exact, "length: $end - $at")};`);
    // First every length and bound, then the contents: a short payload is reported as short even
    // when an earlier field's text is also bad.
    for (const f of body.fields) {
      if (f.length === "fixed") {
        const size = INT_SIZE[f.type as keyof typeof INT_SIZE];
        if (!body.exact) w.writeLine(`if ($end - $at < ${size}) throw ${raise(body.truncated!)};`);
        w.writeLine(`const ${f.name} = ${readInt(imports, f.type as "u8", "$at")};`);
        if (f !== body.fields[body.fields.length - 1]) w.writeLine(`$at += ${size};`);
      } else if (f.length === "count") {
        emitListDecode(w, imports, f, body.truncated!, raise);
      } else if (f.length === "u16") {
        w.writeLine(`if ($end - $at < 2) throw ${raise(body.truncated!)};`);
        w.writeLine(`const $${f.name}Start = $at + 2;`);
        w.writeLine(`const $${f.name}End = $${f.name}Start + ${imports.value(RUNTIME, "readU16")}(bytes, $at);`);
        w.writeLine(`if ($${f.name}End > $end) throw ${raise(body.truncated!)};`);
        w.writeLine(`$at = $${f.name}End;`);
      }
    }
    const range = (f: IrField) => (f.length === "rest" ? "$at, $end" : `$${f.name}Start, $${f.name}End`);
    for (const f of body.fields) {
      if (f.max !== undefined) {
        w.writeLine(`if (${f.name} > ${f.max}) throw ${raise(f.invalid!, `${f.invalidField}: ${f.name}`)};`);
      } else if (f.type === "utf8") {
        w.writeLine(`const ${f.name} = ${imports.value(RUNTIME, "readUtf8")}(bytes, ${range(f)});`);
        w.writeLine(`if (${f.name} === undefined) throw ${raise(f.invalid!)};`);
      } else if (f.type === "bytes") {
        w.writeLine(`const ${f.name} = bytes.subarray(${range(f)});`);
      } else if (f.type === "postcard") {
        emitPostcardFieldDecode(w, imports, places, f, range(f), raise);
      } else if (f.type === "json") {
        const s = f.schema!;
        const t = fieldType(imports, f);
        imports.value(RUNTIME, "JsonFailure");
        w.writeLine(`let ${f.name}: ${t};`);
        w.writeLine("try {");
        w.indent(() => w.writeLine(`${f.name} = ${imports.value(RUNTIME, "readJson")}(bytes, ${range(f)}) as ${t};`));
        w.writeLine("} catch ($problem) {");
        w.indent(() => {
          w.writeLine(`if ($problem instanceof JsonFailure) throw ${raise(f.invalid!, "reason: $problem.reason")};`);
          w.writeLine("throw $problem;");
        });
        w.writeLine("}");
        if (s.kind === "mcp") {
          const guard = s.nullable ? `${f.name} !== null` : "true";
          w.write(s.nullable ? `if (${guard})` : "").block(() => {
            w.writeLine(`const $problem = ${imports.value(RUNTIME, "checkObject")}(${f.name}) ?? options?.check?.(${lit(s.name)}, ${f.name});`);
            w.writeLine(`if ($problem !== undefined) throw ${raise(f.invalid!, "reason: $problem")};`);
          });
        } else if (s.kind === "json") {
          const check = imports.value(`${rev}/json-types.ts`, checkName(s.name));
          w.writeLine(`const $${f.name}Problem = ${check}(${f.name});`);
          w.writeLine(`if ($${f.name}Problem !== undefined) throw ${raise(f.invalid!, `reason: $${f.name}Problem`)};`);
        } else if (s.kind === "mapOfString" || s.kind === "object") {
          const check = imports.value(RUNTIME, s.kind === "mapOfString" ? "checkStringMap" : "checkObject");
          w.writeLine(`const $${f.name}Problem = ${check}(${f.name});`);
          w.writeLine(`if ($${f.name}Problem !== undefined) throw ${raise(f.invalid!, `reason: $${f.name}Problem`)};`);
        }
      }
    }
    return body.fields.map((f) => f.name);
  }

  /**
   * The variants whose bodies read text or JSON (or a length-prefixed field) are decoded by a second
   * function, `$decode<Frame>Rest`, which the frame's decoder calls from its `default`. Those bodies
   * carry most of a decoder's code (bounds, UTF-8 and JSON failures, type checks); kept inline, a
   * frame with many variants compiles to a decoder too big for V8 to inline into its caller (over
   * 460 bytes of bytecode: the /requests ask decoder was 5 KB), so every call of it, the fixed-size
   * variants' too, pays a full call. Split, the fixed-size variants are read by a small function,
   * and the others pay one more call next to the text or JSON they read.
   */
  function readsOutOfLine(body: IrBody): boolean {
    return body.fields.some((f) => f.type === "json" || f.type === "utf8" || f.type === "postcard" || f.type === "list" || f.length === "u16");
  }

  function restDecodeName(frame: IrFrame): string {
    return `$${decodeName(frame)}Rest`;
  }

  /**
   * A body whose fields are fixed-size integers and then one JSON field to the end of the frame
   * (every MCP payload) is encoded into its final buffer at once: `encodeJsonAfter` leaves room for
   * the header and the integers in front of the JSON, so the JSON is neither allocated twice nor
   * copied. Emits the checks and that call, and returns the fields still to write (the integers);
   * returns undefined, emitting nothing, for any other body.
   */
  function emitJsonTailPrepare(w: CodeBlockWriter, imports: Imports, body: IrBody, frameLit: string, headerSize: number): IrBody | undefined {
    const last = body.fields[body.fields.length - 1];
    if (!last || last.type !== "json" || last.length !== "rest") return undefined;
    const ints = body.fields.slice(0, -1);
    if (!ints.every((f) => f.length === "fixed")) return undefined;
    let prefix = headerSize;
    for (const f of ints) {
      w.writeLine(`const $${f.name} = ${imports.value(RUNTIME, "checkInt")}(${frameLit}, ${lit(f.name)}, ${lit(f.type)}, value.${f.name});`);
      prefix += INT_SIZE[f.type as keyof typeof INT_SIZE];
    }
    const nullable = last.schema?.kind === "mcp" && last.schema.nullable;
    w.writeLine(`const $out = ${imports.value(RUNTIME, "encodeJsonAfter")}(${prefix}, ${frameLit}, ${lit(last.name)}, value.${last.name}${nullable ? " ?? null" : ""});`);
    return { ...body, fields: ints };
  }

  /** Checks and serializes every field; returns the size terms of the body. */
  function emitBodyPrepare(w: CodeBlockWriter, imports: Imports, body: IrBody, frameLit: string): string[] {
    const sizes: string[] = [];
    for (const f of body.fields) {
      if (f.length === "fixed") {
        w.writeLine(`const $${f.name} = ${intCheck(imports, frameLit, f.name, f.type, `value.${f.name}`)};`);
        if (f.max !== undefined) {
          w.writeLine(`if ($${f.name} > ${f.max}) throw new ${imports.value(RUNTIME, "EncodeError")}(${frameLit}, ${lit(f.name)}, ${lit(`${f.name} must be at most ${f.max}`)});`);
        }
        sizes.push(String(INT_SIZE[f.type as keyof typeof INT_SIZE]));
        continue;
      }
      if (f.length === "count") {
        sizes.push(emitListPrepare(w, imports, f, frameLit));
        continue;
      }
      if (f.type === "bytes") w.writeLine(`const $${f.name} = ${imports.value(RUNTIME, "checkBytes")}(${frameLit}, ${lit(f.name)}, value.${f.name});`);
      else if (f.type === "utf8") w.writeLine(`const $${f.name} = ${imports.value(RUNTIME, "encodeUtf8")}(${frameLit}, ${lit(f.name)}, value.${f.name});`);
      else if (f.type === "postcard") w.writeLine(postcardFieldEncode(imports, places, f));
      else {
        const nullable = f.schema?.kind === "mcp" && f.schema.nullable;
        w.writeLine(`const $${f.name} = ${imports.value(RUNTIME, "encodeJson")}(${frameLit}, ${lit(f.name)}, value.${f.name}${nullable ? " ?? null" : ""});`);
      }
      if (f.length === "u16") {
        w.writeLine(`${imports.value(RUNTIME, "checkU16Length")}(${frameLit}, ${lit(f.name)}, $${f.name}.length);`);
        sizes.push("2");
      }
      sizes.push(`$${f.name}.length`);
    }
    return sizes;
  }

  function emitBodyWrite(w: CodeBlockWriter, imports: Imports, body: IrBody): void {
    body.fields.forEach((f, i) => {
      const last = i === body.fields.length - 1;
      if (f.length === "count") return emitListWrite(w, imports, f);
      if (f.length === "fixed") {
        w.writeLine(writeInt(imports, f.type as "u8", "$at", `$${f.name}`));
        if (!last) w.writeLine(`$at += ${INT_SIZE[f.type as keyof typeof INT_SIZE]};`);
        return;
      }
      if (f.length === "u16") {
        w.writeLine(writeInt(imports, "u16", "$at", `$${f.name}.length`));
        w.writeLine("$at += 2;");
      }
      w.writeLine(`$out.set($${f.name}, $at);`);
      if (!last) w.writeLine(`$at += $${f.name}.length;`);
    });
  }

  function readInt(imports: Imports, type: "u8" | "u16" | "u32" | "u64", at: string): string {
    return intReader(imports, type, at);
  }

  function writeInt(imports: Imports, type: "u8" | "u16" | "u32" | "u64", at: string, expr: string): string {
    return intWriter(imports, type, "$out", at, expr);
  }

  function emitMcpTypes(file: SourceFile, ir: IrRevision): void {
    // Spelled out from the SDK's declarations: the codec's types need no SDK installed, and stay exact.
    const source = mcpTypeSource(ir.mcpTypes);
    ir.mcpTypes.forEach((t, i) => {
      const sdkName = t.schema.replace(/Schema$/, "") + (t.member ? `[${lit(t.member)}]` : "");
      file.addTypeAlias({
        isExported: true,
        name: t.name,
        docs: [
          `${t.doc}\n\nThe Model Context Protocol's own type (revision ${ir.mcpRevision}): the MCP TypeScript SDK's \`${sdkName}\` ` +
            `(@modelcontextprotocol/sdk ${source.sdkVersion}), written out here so these types need no SDK installed.`,
        ],
        type: source.types[i]!,
      });
    });
    file.addVariableStatement({
      isExported: true,
      declarationKind: VariableDeclarationKind.Const,
      docs: ["Every MCP type a frame of this revision names, as `TypeCheck` receives it."],
      declarations: [{ name: "mcpTypeNames", initializer: `[${ir.mcpTypes.map((t) => lit(t.name)).join(", ")}] as const` }],
    });
  }

  function emitIndex(file: SourceFile, ir: IrRevision, errorPathOf: (id: string) => string): void {
    file.addVariableStatement({
      isExported: true,
      declarationKind: VariableDeclarationKind.Const,
      docs: [`The spec revision these frames implement.`],
      declarations: [{ name: "revision", initializer: lit(ir.revision) }],
    });
    const paths = new Set<string>();
    for (const f of ir.frames) paths.add(`${rev}/${frameModule(f)}`);
    for (const e of ir.errorTypes) paths.add(errorPathOf(e.id));
    for (const t of ir.postcardTypes) paths.add(`${rev}/${t.id}.ts`);
    paths.add(`${rev}/mcp-types.ts`);
    if (ir.jsonTypes.length > 0) paths.add(`${rev}/json-types.ts`);
    // One insertion for all of them: ts-morph parses the file again after every insertion.
    file.addExportDeclarations([...paths].sort().map((p) => ({ moduleSpecifier: importPath(`${rev}/index.ts`, p) })));
    void StructureKind;
  }

  void frameById;
}

/** An error variant's text for TSDoc; a quoted inner error is named by its type. */
function messageDoc(v: IrErrorVariant, nameOf: (errorTypeId: string) => string): string {
  const source = v.fields.find((f) => f.type === "error" && v.message.includes(`{${f.name}}`));
  if (!source) return v.message.includes("{") ? "`" + v.message + "`" : `"${v.message}"`;
  const [before, after] = v.message.split(`{${source.name}}`) as [string, string];
  const inner = `the message of the {@link ${nameOf(source.errorTypeId!)}} it carries`;
  return [before ? `"${before}" then` : "", inner, after ? `then "${after}"` : ""].filter(Boolean).join(" ");
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").replace(/\*\//g, "*\\/").trim();
}

/** `unknown frame type {type}` → a template literal reading `detail.type`. */
function messageTemplate(message: string): string {
  if (!message.includes("{")) return lit(message);
  const body = message.replace(/[`\\$]/g, (c) => `\\${c}`).replace(/\{([a-z_][a-z0-9_]*)\}/g, (_, name: string) => (name === "source" ? "${detail.source.message}" : `\${detail.${name}}`));
  return "`" + body + "`";
}
