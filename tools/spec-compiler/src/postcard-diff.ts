// How a postcard shape may change between revisions: postcard writes no names and no counts, so a
// struct's fields and an enum's existing variants never change; a variant appended at the end is
// additive (the Rust types say "new variants only appended").
import type { IrPostcardField, IrPostcardShape, PostcardTypeRef } from "./postcard-ir.js";

export type PostcardChange = { readonly class: "forbidden" | "breaking" | "additive" | "editorial"; readonly sentence: string };

function refShape(ref: PostcardTypeRef): string {
  return ref.kind === "scalar" ? ref.scalar : ref.kind === "ref" ? ref.id : `${ref.kind}<${refShape(ref.of)}>`;
}

const fieldsShape = (fields: readonly IrPostcardField[]) => fields.map((f) => `${f.name}: ${refShape(f.type)}`).join(", ");
const fieldsDoc = (fields: readonly IrPostcardField[]) => fields.map((f) => f.doc).join("\n");

/** The changes from `a` to `b` of one postcard shape (`what` names it in sentences). */
export function comparePostcardShapes(a: IrPostcardShape | undefined, b: IrPostcardShape | undefined, what: string, A: string, B: string): PostcardChange[] {
  if (!a && !b) return [];
  if (!a || !b) return [{ class: "forbidden", sentence: `${what} was ${a ? "postcard" : "not postcard"} in ${A} and is ${b ? "postcard" : "not postcard"} in ${B}; a layout never changes in place.` }];
  if (a.kind !== b.kind) return [{ class: "forbidden", sentence: `${what} was a postcard ${a.kind} in ${A} and is a postcard ${b.kind} in ${B}; a layout never changes in place.` }];
  if (a.kind === "struct" && b.kind === "struct") {
    if (fieldsShape(a.fields) !== fieldsShape(b.fields)) return [{ class: "forbidden", sentence: `${what} had fields (${fieldsShape(a.fields)}) in ${A} and has (${fieldsShape(b.fields)}) in ${B}; postcard writes no names or counts, so fields never change.` }];
    return fieldsDoc(a.fields) !== fieldsDoc(b.fields) ? [{ class: "editorial", sentence: `${what}: field descriptions changed.` }] : [];
  }
  if (a.kind !== "enum" || b.kind !== "enum") return [];
  const out: PostcardChange[] = [];
  if (a.property !== b.property) out.push({ class: "breaking", sentence: `${what}: the decoded value named its variant in \`${a.property}\` in ${A} and names it in \`${b.property}\` in ${B}.` });
  a.variants.forEach((va, i) => {
    const vb = b.variants[i];
    if (!vb) out.push({ class: "forbidden", sentence: `${what}: variant index ${i} meant ${va.name} in ${A} and is gone in ${B}; a variant index is never removed.` });
    else if (vb.name !== va.name) out.push({ class: "forbidden", sentence: `${what}: variant index ${i} meant ${va.name} in ${A} and means ${vb.name} in ${B}; a variant index never takes another meaning.` });
    else if (fieldsShape(va.fields) !== fieldsShape(vb.fields)) out.push({ class: "forbidden", sentence: `${what}: ${va.name} had fields (${fieldsShape(va.fields)}) in ${A} and has (${fieldsShape(vb.fields)}) in ${B}; fields never change.` });
    else if (va.doc !== vb.doc || fieldsDoc(va.fields) !== fieldsDoc(vb.fields)) out.push({ class: "editorial", sentence: `${what}: the description of ${va.name} changed.` });
  });
  for (const vb of b.variants.slice(a.variants.length)) out.push({ class: "additive", sentence: `${what}: new variant ${vb.name} (index ${b.variants.indexOf(vb)}), appended.` });
  return out;
}
