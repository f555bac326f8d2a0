// How postcard shapes may change between revisions: appended variants only.
import { describe, expect, it } from "vitest";
import { compileRevision } from "../src/generate.js";
import { comparePostcardShapes } from "../src/postcard-diff.js";
import type { IrPostcardShape } from "../src/postcard-ir.js";
import { repoRoot } from "./helpers.js";

const ir = compileRevision(repoRoot, "2.3.0");
const node = ir.postcardTypes.find((t) => t.id === "filetree/node")!.shape as Extract<IrPostcardShape, { kind: "enum" }>;
const classes = (b: IrPostcardShape) => comparePostcardShapes(node, b, "filetree/node", "2.3.0", "2.4.0").map((c) => `${c.class}: ${c.sentence}`);

describe("postcard shapes across revisions", () => {
  it("finds nothing between a shape and itself", () => {
    expect(classes(node)).toEqual([]);
  });
  it("takes an appended variant as additive", () => {
    expect(classes({ ...node, variants: [...node.variants, { name: "Fifo", doc: "A pipe.", fields: node.variants[0]!.fields.slice(0, 1) }] })).toEqual([
      "additive: filetree/node: new variant Fifo (index 3), appended.",
    ]);
  });
  it("refuses a renumbered, removed or reshaped variant", () => {
    const [file, dir, link] = node.variants;
    expect(classes({ ...node, variants: [dir!, file!, link!] })[0]).toBe("forbidden: filetree/node: variant index 0 meant File in 2.3.0 and means Directory in 2.4.0; a variant index never takes another meaning.");
    expect(classes({ ...node, variants: [file!, dir!] })).toEqual(["forbidden: filetree/node: variant index 2 meant Symlink in 2.3.0 and is gone in 2.4.0; a variant index is never removed."]);
    expect(classes({ ...node, variants: [{ ...file!, fields: file!.fields.slice(1) }, dir!, link!] })[0]).toMatch(/^forbidden: filetree\/node: File had fields \(name: string, size: option<u64>/);
  });
});
