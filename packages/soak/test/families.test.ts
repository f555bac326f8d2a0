// The families soak's short, deterministic run (issue 24): each scenario a few seeded rounds, checking
// invariants (never timings; the waits are hang guards). `pnpm soak --families --seconds 600` runs the
// long one; DIVERGE_SOAK_SEED replays a run.
//
// KNOWN BUGS (found by these scenarios, written down for the lead, not fixed here since they belong to
// other families): a failure matching KNOWN_BUGS is printed as such and does not fail the test unless
// DIVERGE_SOAK_STRICT=1; every other failure does. See the README's "Families soak" section.
import { describe, expect, it } from "vitest";
import { FAMILY_SCENARIOS, runFamilyScenario, type FamilyScenario } from "../src/index.js";

const SEED = Number(process.env.DIVERGE_SOAK_SEED ?? 2026);
const STRICT = process.env.DIVERGE_SOAK_STRICT === "1";
const ROUNDS: Record<FamilyScenario, number> = { vault: 2, command: 3, write: 2, fuse: 3 };

/** Failures of a bug of another family, reported to the lead (README, "Known bugs"). */
const KNOWN_BUGS: readonly { readonly name: string; readonly pattern: RegExp }[] = [
  // None at present. The two FUSE liveness bugs found after issue 25's rework were fixed at their
  // cause (an ask made while /requests was closing waited for a next connection; libfuse 2.9
  // refused a mount point a program had written into as the last mount went).
];

describe(`families soak (seed ${SEED})`, () => {
  for (const scenario of FAMILY_SCENARIOS) {
    it(`${scenario}: its invariants hold over ${ROUNDS[scenario]} seeded rounds, memory flat`, { timeout: 120_000 }, async () => {
      const report = await runFamilyScenario(scenario, { seed: SEED, rounds: ROUNDS[scenario] });
      process.stdout.write(`families soak ${scenario}: ${JSON.stringify(report)}\n`);
      if (report.skipped) {
        console.log(`families soak ${scenario} skipped: ${report.skipped}`);
        return;
      }
      const known = report.failures.filter((failure) => KNOWN_BUGS.some((bug) => bug.pattern.test(failure)));
      for (const failure of known) console.log(`KNOWN BUG (seed ${SEED}): ${failure}`);
      // A round that cannot start (a known bug) ends the scenario early.
      if (known.length === 0 || STRICT) expect(report.rounds).toBe(ROUNDS[scenario]);
      expect(STRICT ? report.failures : report.failures.filter((failure) => !known.includes(failure))).toEqual([]);
      for (const figures of Object.values(report.rss)) expect(figures.samples).toBeGreaterThan(0);
    });
  }
});
