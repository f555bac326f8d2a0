// Every error variant the spec declares is produced by at least one golden example, so the
// generated tests and the conformance vectors exercise every exact message.
import { describe, expect, it } from "vitest";
import { compileRevision, listRevisions } from "../src/generate.js";
import { repoRoot } from "./helpers.js";

function templateRegex(message: string): RegExp {
  const escaped = message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\\\{[a-z_][a-z0-9_]*\\\}/g, ".*");
  return new RegExp(escaped);
}

for (const revision of listRevisions(repoRoot)) {
  describe(`spec ${revision}: golden examples`, () => {
    const ir = compileRevision(repoRoot, revision);
    const examples = ir.frames.flatMap((frame) => frame.examples.filter((e) => e.error).map((e) => ({ frame, error: e.error! })));

    for (const errorType of ir.errorTypes) {
      for (const variant of errorType.variants) {
        it(`produce ${errorType.id} ${variant.name}`, () => {
          const direct = examples.some((e) => e.frame.errorTypeId === errorType.id && e.error.variant === variant.name);
          // A wrapped error (a vault request inside an ask) shows up as its message inside the outer one.
          const pattern = variant.message.includes("{source}") ? undefined : templateRegex(variant.message);
          const wrapped = pattern !== undefined && examples.some((e) => e.frame.errorTypeId !== errorType.id && pattern.test(e.error.message ?? e.error.messagePrefix ?? ""));
          expect(direct || wrapped, `no example produces ${variant.name}: "${variant.message}"`).toBe(true);
        });
      }
    }

    it("give every frame at least one value and, where it can fail, one error", () => {
      for (const frame of ir.frames) {
        expect(frame.examples.some((e) => e.value), `${frame.id} has no decoded example`).toBe(true);
      }
    });

    it("give every variant of every tagged frame an example", () => {
      for (const frame of ir.frames.filter((f) => f.switch)) {
        for (const variant of frame.switch!.variants) {
          expect(frame.examples.some((e) => e.value?.[frame.switch!.property] === variant.name), `${frame.id} ${variant.name}`).toBe(true);
        }
      }
    });
  });
}
