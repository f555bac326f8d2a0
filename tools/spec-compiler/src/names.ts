// How spec ids and names become TypeScript module paths and identifiers.
import { frameOf, type IrErrorType, type IrFrame, type IrRevision } from "./ir.js";

/** `tools-begin/client/channel-request` → `tools-begin/client/channel-request.ts` under the revision. */
export function frameModule(frame: IrFrame): string {
  return `${frame.id}.ts`;
}

/** An error type used by exactly one frame lives in that frame's module; any other in its own. */
export function errorModule(ir: IrRevision, error: IrErrorType): string {
  if (error.usedBy.length === 1) return frameModule(frameOf(ir, error.usedBy[0]!)!);
  return `${error.id}.ts`;
}

export const decodeName = (frame: IrFrame) => `decode${frame.name}`;
export const encodeName = (frame: IrFrame) => `encode${frame.name}`;
export const tagsName = (frame: IrFrame) => `${frame.name}Tag`;
export const variantTypeName = (frame: IrFrame, variant: string) => `${frame.name}${variant}`;
export const detailName = (error: IrErrorType) => `${error.name}Detail`;
export const describeName = (error: IrErrorType) => `describe${error.name}`;

/** Relative ESM import specifier from one generated module to another (both relative to one root). */
export function importPath(from: string, to: string): string {
  const fromParts = from.split("/").slice(0, -1);
  const toParts = to.replace(/\.ts$/, ".js").split("/");
  let common = 0;
  while (common < fromParts.length && common < toParts.length - 1 && fromParts[common] === toParts[common]) common++;
  const up = fromParts.length - common;
  const rest = toParts.slice(common).join("/");
  return up === 0 ? `./${rest}` : `${"../".repeat(up)}${rest}`;
}

/** A string as a TypeScript literal, with stable quoting. */
export const lit = (value: string) => JSON.stringify(value);
