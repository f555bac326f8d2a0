// Properties every generated frame must have, for every revision's frames:
//  - decode(encode(v)) equals v for generated values;
//  - any bytes at all decode to a value or to the frame's own typed error — nothing else, no hang;
//  - a value that decodes re-encodes to bytes that decode to the same value.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromHex } from "../src/runtime/index.js";
import { framesUnderTest } from "./gen/2.3.0/arbitraries.js";

/** Cases per decoder for arbitrary bytes; CI runs at least 10,000. */
const RUNS = Number(process.env.DIVERGE_FUZZ_RUNS ?? 10_000);

/** Golden bytes bent out of shape: truncated, extended, a byte flipped, a byte inserted or removed. */
function mutated(seeds: readonly string[]): fc.Arbitrary<Uint8Array> {
  const bases = seeds.map((s) => fromHex(s));
  if (bases.length === 0) return fc.uint8Array({ maxLength: 64 });
  return fc
    .tuple(fc.constantFrom(...bases), fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom("cut", "flip", "insert", "delete", "append"))
    .map(([base, at, byte, how]) => {
      const i = base.length === 0 ? 0 : at % base.length;
      switch (how) {
        case "cut":
          return base.slice(0, i);
        case "flip": {
          const out = base.slice();
          if (out.length > 0) out[i] = byte;
          return out;
        }
        case "insert":
          return Uint8Array.from([...base.slice(0, i), byte, ...base.slice(i)]);
        case "delete":
          return Uint8Array.from([...base.slice(0, i), ...base.slice(i + 1)]);
        default:
          return Uint8Array.from([...base, byte]);
      }
    });
}

for (const frame of framesUnderTest) {
  describe(`${frame.id} properties`, () => {
    it("decodes what it encodes", () => {
      fc.assert(
        fc.property(frame.arbitrary, (value) => {
          const bytes = frame.encode(value as never);
          expect(frame.decode(bytes)).toEqual(value);
        }),
        { numRuns: 500 },
      );
    });

    it(`gives a value or its own typed error for any bytes (${RUNS} cases)`, () => {
      let values = 0;
      let errors = 0;
      fc.assert(
        fc.property(fc.oneof(fc.uint8Array({ maxLength: 96 }), mutated(frame.seeds)), (bytes) => {
          let value: unknown;
          try {
            value = frame.decode(bytes);
          } catch (error) {
            if (!(error instanceof frame.error)) throw new Error(`${frame.id} threw ${String(error)} for ${Buffer.from(bytes).toString("hex")}`);
            expect(error.message.length).toBeGreaterThan(0);
            errors++;
            return;
          }
          values++;
          // What decodes must re-encode to bytes that decode the same (encoding may normalise, e.g. JSON spacing).
          expect(frame.decode(frame.encode(value as never))).toEqual(value);
        }),
        { numRuns: RUNS },
      );
      expect(values + errors).toBe(RUNS);
    });
  });
}
