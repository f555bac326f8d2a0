// The soak's short version: a few thousand exchanges over both transports with seeded faults.
// `pnpm soak --exchanges 100000 --seed N` runs the long one. DIVERGE_SOAK_SEED replays a run.
import { describe, expect, it } from "vitest";
import { runSoak } from "../src/index.js";

const SEED = Number(process.env.DIVERGE_SOAK_SEED ?? 2026);
const EXCHANGES = Number(process.env.DIVERGE_SOAK_EXCHANGES ?? 3000);

describe(`soak (seed ${SEED}, ${EXCHANGES} exchanges)`, () => {
  // A fixed amount of work: a loaded machine makes it slower, not wrong, so the bound is only a hang guard.
  it("ends every exchange exactly once with the outcome its faults imply, nothing hangs, RSS stays under its bound", { timeout: 900_000 }, async () => {
    const report = await runSoak({ exchanges: EXCHANGES, seed: SEED, concurrency: 48, watchdogMs: 20_000, rssBoundMiB: 512, abruptCloseRate: 1 / 400 });
    process.stdout.write(`soak: ${JSON.stringify(report)}\n`);
    expect(report.failures).toEqual([]);
    expect(report.pathsExchanges + report.multiplexedExchanges).toBe(EXCHANGES);
    expect(report.faultTotal).toBeGreaterThan(EXCHANGES / 10);
    expect(report.faults["multiplexed.abruptClose"]).toBeGreaterThan(0);
    // Every cycle: a driver reset before the provider, two failed handshakes on /, a stalled daemon.
    expect(report.faults["multiplexed.driverResetBeforeProvider"]).toBe(report.multiplexedConnections);
    expect(report.faults["multiplexed.failedHandshake"]).toBe(2 * report.multiplexedConnections);
    expect(report.faults["multiplexed.stalledDaemon"]).toBe(report.multiplexedConnections);
    expect(report.reasked).toBeGreaterThan(0);
    expect(report.peakRssMiB).toBeLessThan(report.rssBoundMiB);
    // Nothing the run made outlives it: the heap returns to within 32 MiB of where it began.
    expect(report.finalHeapMiB - report.baselineHeapMiB).toBeLessThan(32);
  });
});
