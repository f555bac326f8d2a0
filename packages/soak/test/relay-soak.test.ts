// The relay soak's short version: relayed tools/call through both MCP relays with two restarts of the
// container's MCP server. `pnpm soak --relay --exchanges 1000000` runs the long one.
import { describe, expect, it } from "vitest";
import { runRelaySoak } from "../src/index.js";

const CALLS = Number(process.env.DIVERGE_RELAY_SOAK_CALLS ?? 4000);

describe(`relay soak (${CALLS} calls)`, () => {
  it("answers every call with its own result, across restarts; heap, listeners and sessions flat after warm-up; no leak warning", { timeout: 120_000 }, async () => {
    const report = await runRelaySoak({ calls: CALLS, concurrency: 16, restarts: 2, samples: 10, heapGrowthMiB: 16 });
    process.stdout.write(`relay soak: ${JSON.stringify({ ...report, samples: report.samples.map((s) => [s.calls, s.heapMiB, s.abortListeners]) })}\n`);
    expect(report.failures).toEqual([]);
    expect(report.calls).toBeGreaterThanOrEqual(CALLS);
    expect(report.failedDuringRestart).toBeLessThanOrEqual(2 * report.restarts);
    expect(report.progressDelivered).toBeGreaterThan(0);
    expect(report.warnings.filter((warning) => warning.startsWith("MaxListenersExceededWarning"))).toEqual([]);
  });
});
