#!/usr/bin/env node
// pnpm soak --exchanges 100000 --seed 7 [--concurrency 64] [--rss-bound-mib 512] [--watchdog-ms 30000]
import { parseArgs } from "node:util";
import { runSoak } from "./soak.js";

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
