// The Markdown reference and static site, per revision (issue 3 fills this in).
import type { IrRevision } from "../ir.js";
import type { GeneratedFile } from "./project.js";

export function emitDocs(_revisions: readonly IrRevision[], _compilerVersion: string): GeneratedFile[] {
  return [];
}
