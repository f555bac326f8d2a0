// The relay soak's short version: relayed tools/call through every MCP relay (inward on the begin scope
// and over /tool/*, outward over /requests and on the begin scope's channels) with two restarts of the
// container's MCP server. `pnpm soak --relay --exchanges 1000000` runs the long one.
import { describe, expect, it } from "vitest";
import { runRelaySoak } from "../src/index.js";

const CALLS = Number(process.env.DIVERGE_RELAY_SOAK_CALLS ?? 4000);

describe(`relay soak (${CALLS} calls)`, () => {
  // A fixed amount of work: a loaded machine makes it slower, not wrong, so the bound is only a hang guard.
  it("answers every call with its own result, across restarts; heap, listeners and sessions flat after warm-up; no leak warning", { timeout: 900_000 }, async () => {
    const report = await runRelaySoak({ calls: CALLS, concurrency: 16, restarts: 2, samples: 10, heapGrowthMiB: 16 });
    process.stdout.write(`relay soak: ${JSON.stringify({ ...report, samples: report.samples.map((s) => [s.calls, s.heapMiB, s.abortListeners]) })}\n`);
    expect(report.failures).toEqual([]);
    expect(report.calls).toBeGreaterThanOrEqual(CALLS);
    expect(report.relays).toEqual(["inward", "outward", "tool", "outward-scope"]);
    // Every relay answered its share.
    for (const relay of report.relays) expect(report.perRelay[relay], relay).toBeGreaterThanOrEqual(CALLS / report.relays.length - 2 * report.restarts);
    expect(report.failedDuringRestart).toBeLessThanOrEqual(report.relays.length * report.restarts);
    // Progress is asked on every fifth call of each relay and reaches its caller (a few may be lost at the restarts).
    expect(report.progressDelivered).toBeGreaterThan(report.progressAsked * 0.9);
    expect(report.warnings.filter((warning) => warning.startsWith("MaxListenersExceededWarning"))).toEqual([]);
  });
});
