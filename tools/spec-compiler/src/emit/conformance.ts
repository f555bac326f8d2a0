// The registry `diverge-conformance` looks frames up in: every revision, every frame id, with its
// decoder, encoder, error class and which value fields are bytes (hex in a view).
import { errorTypeOf, type IrRevision } from "../ir.js";
import { decodeName, encodeName, lit } from "../names.js";
import { banner, type GeneratedFile } from "./project.js";
import { frameViewFields, hasPostcard, viewShapes } from "./postcard.js";

export function emitConformanceRegistry(revisions: readonly IrRevision[], compilerVersion: string): GeneratedFile {
  const newest = revisions[revisions.length - 1]!;
  const lines: string[] = [banner(newest, compilerVersion).trimEnd(), `import type { FrameEntry } from "../entry.js";`];
  const alias = (rev: string) => `r${rev.replace(/\./g, "_")}`;
  for (const ir of revisions) lines.push(`import * as ${alias(ir.revision)} from ${lit(`@diverge/codec/${ir.revision}`)};`);
  lines.push("");
  for (const ir of revisions) {
    if (!ir.frames.some(hasPostcard)) continue;
    lines.push(`/** The postcard shapes of revision ${ir.revision}, which views walk to write u64 as decimal text. */`);
    lines.push(`const shapes${alias(ir.revision)} = ${JSON.stringify(viewShapes(ir))};`);
    lines.push("");
  }
  lines.push("/** Every frame of every revision, by revision and frame id. */");
  lines.push("export const registry: Readonly<Record<string, Readonly<Record<string, FrameEntry>>>> = {");
  for (const ir of revisions) {
    const a = alias(ir.revision);
    lines.push(`  ${lit(ir.revision)}: {`);
    for (const frame of ir.frames) {
      const error = errorTypeOf(ir, frame.errorTypeId)!;
      const bytes = frame.postcard
        ? { "": [] }
        : frame.body
        ? { "": frame.body.fields.filter((f) => f.type === "bytes").map((f) => f.name) }
        : Object.fromEntries(frame.switch!.variants.map((v) => [v.name, v.body.fields.filter((f) => f.type === "bytes").map((f) => f.name)]));
      lines.push(`    ${lit(frame.id)}: {`);
      lines.push(`      decode: ${a}.${decodeName(frame)},`);
      lines.push(`      encode: ${a}.${encodeName(frame)} as FrameEntry["encode"],`);
      lines.push(`      error: ${a}.${error.name},`);
      lines.push(`      discriminant: ${frame.switch ? lit(frame.switch.property) : "undefined"},`);
      lines.push(`      bytesFields: ${JSON.stringify(bytes)},`);
      if (hasPostcard(frame)) {
        const view = frame.postcard ? { root: { ref: frame.id } } : { fields: frameViewFields(frame) };
        lines.push(`      postcard: { shapes: shapes${a}, ...${JSON.stringify(view)} },`);
      }
      lines.push(`    },`);
    }
    lines.push(`  },`);
  }
  lines.push("};");
  return { path: "packages/conformance/src/gen/registry.ts", text: lines.join("\n") + "\n" };
}
