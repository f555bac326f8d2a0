#!/usr/bin/env node
// pnpm soak --exchanges 100000 --seed 7 [--concurrency 64] [--rss-bound-mib 512] [--watchdog-ms 30000]
// pnpm soak --relay [--exchanges 1000000] [--concurrency 16] [--restarts 10] [--relays inward,outward,tool,outward-scope]:
// relayed tools/call through the MCP relays (all four by default), the container's MCP server restarted
// now and then; heap and listeners sampled.
// pnpm soak --families [--seconds 600] [--rounds 3] [--seed N] [--scenarios vault,command,write,fuse] [--rss-factor 2]:
// the families soak (vault locks across two proxies, commands killed mid-stream, writes abandoned, FUSE
// providers gone mid-operation), invariants checked, proxy and provider RSS sampled.
import { parseArgs } from "node:util";
import { FAMILY_SCENARIOS, runFamilySoak, type FamilyScenario } from "./families.js";
import { runRelaySoak, SOAK_RELAYS, type SoakRelay } from "./relay.js";
import { runSoak } from "./soak.js";

if (process.argv.includes("--families")) {
  const { values: families } = parseArgs({
    options: { families: { type: "boolean" }, seed: { type: "string", default: String(Date.now() % 1_000_000) }, seconds: { type: "string" }, rounds: { type: "string", default: "3" }, scenarios: { type: "string", default: FAMILY_SCENARIOS.join(",") }, "rss-factor": { type: "string", default: "2" }, json: { type: "boolean", default: false } },
    strict: true,
  });
  const scenarios = families.scenarios.split(",").filter((name) => name !== "");
  const unknown = scenarios.filter((name) => !(FAMILY_SCENARIOS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`--scenarios: unknown ${unknown.join(", ")} (known: ${FAMILY_SCENARIOS.join(", ")})\n`);
    process.exit(2);
  }
  const report = await runFamilySoak({
    seed: Number(families.seed),
    rounds: Number(families.rounds),
    ...(families.seconds !== undefined ? { seconds: Number(families.seconds) } : {}),
    scenarios: scenarios as FamilyScenario[],
    rssFactor: Number(families["rss-factor"]),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  if (families.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    process.stdout.write(`families soak (seed ${report.seed}) ${report.failures.length === 0 ? "passed" : "FAILED"}\n`);
    for (const s of report.scenarios) {
      process.stdout.write(`  ${s.scenario}: ${s.skipped ? `skipped (${s.skipped})` : `${s.rounds} rounds, ${s.seconds} s, ${JSON.stringify(s.counts)}`}\n`);
      for (const [name, rss] of Object.entries(s.rss)) process.stdout.write(`    RSS ${name}: first third ${rss.firstMiB} MiB, last third ${rss.lastMiB} MiB, peak ${rss.peakMiB} MiB (${rss.samples} samples)\n`);
      for (const failure of s.failures) process.stdout.write(`    ${failure}\n`);
    }
  }
  process.exit(report.failures.length === 0 ? 0 : 1);
}

if (process.argv.includes("--relay")) {
  const { values: relay } = parseArgs({
    options: { relay: { type: "boolean" }, exchanges: { type: "string", default: "1000000" }, concurrency: { type: "string", default: "16" }, restarts: { type: "string", default: "10" }, relays: { type: "string", default: SOAK_RELAYS.join(",") }, json: { type: "boolean", default: false } },
    strict: true,
  });
  const relays = relay.relays.split(",").filter((name) => name !== "");
  const unknown = relays.filter((name) => !(SOAK_RELAYS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`--relays: unknown ${unknown.join(", ")} (known: ${SOAK_RELAYS.join(", ")})\n`);
    process.exit(2);
  }
  const report = await runRelaySoak({
    calls: Number(relay.exchanges),
    relays: relays as SoakRelay[],
    concurrency: Number(relay.concurrency),
    restarts: Number(relay.restarts),
    samples: 40,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  if (relay.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    const { failures, samples, ...figures } = report;
    process.stdout.write(`relay soak ${failures.length === 0 ? "passed" : "FAILED"}: ${JSON.stringify(figures, null, 2)}\n`);
    for (const s of samples) process.stdout.write(`  after ${s.calls} calls: heap ${s.heapMiB} MiB, rss ${s.rssMiB} MiB, abort listeners ${s.abortListeners}, program sessions ${s.programSessions}, server sessions ${s.serverSessions}\n`);
    for (const failure of failures) process.stdout.write(`  ${failure}\n`);
  }
  process.exit(report.failures.length === 0 ? 0 : 1);
}

const { values } = parseArgs({
  options: {
    exchanges: { type: "string", default: "100000" },
    seed: { type: "string", default: String(Date.now() % 1_000_000) },
    concurrency: { type: "string", default: "64" },
    "paths-share": { type: "string", default: "0.5" },
    "rss-bound-mib": { type: "string", default: "512" },
    "watchdog-ms": { type: "string", default: "30000" },
    json: { type: "boolean", default: false },
  },
  strict: true,
});

const report = await runSoak({
  exchanges: Number(values.exchanges),
  seed: Number(values.seed),
  concurrency: Number(values.concurrency),
  pathsShare: Number(values["paths-share"]),
  rssBoundMiB: Number(values["rss-bound-mib"]),
  watchdogMs: Number(values["watchdog-ms"]),
  log: (line) => process.stderr.write(`${line}\n`),
});
if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
else {
  const { failures, ...figures } = report;
  process.stdout.write(`soak ${failures.length === 0 ? "passed" : "FAILED"}: ${JSON.stringify(figures, null, 2)}\n`);
  for (const failure of failures) process.stdout.write(`  ${failure}\n`);
}
process.exitCode = report.failures.length === 0 ? 0 : 1;
