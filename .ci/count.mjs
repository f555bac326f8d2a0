// Sums the per-package vitest JSON reports into the one closing line CI prints. A package that has
// a test script but left no report (it crashed, or was never run) counts as one failure.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";

const [dir, status] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;
const reported = new Set();
for (const name of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const report = JSON.parse(readFileSync(join(dir, name), "utf8"));
  reported.add(basename(name, ".json"));
  passed += report.numPassedTests ?? 0;
  failed += (report.numFailedTests ?? 0) + (report.numRuntimeErrorTests ?? 0);
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  if (report.success === false && (report.numFailedTests ?? 0) === 0) failed += 1;
  // Name each failure: CI shows only the tail of the run, and a flaky test must be findable from it.
  for (const file of report.testResults ?? []) {
    for (const test of file.assertionResults ?? []) {
      if (test.status !== "failed") continue;
      const where = file.name.replace(/^.*?\/(packages|tools)\//, "$1/");
      console.log(`FAILED ${where} > ${test.fullName}`);
      for (const message of (test.failureMessages ?? []).slice(0, 1)) {
        console.log(message.split("\n").slice(0, 6).map((line) => `    ${line}`).join("\n"));
      }
    }
    if (file.status === "failed" && !(file.assertionResults ?? []).some((t) => t.status === "failed")) {
      console.log(`FAILED ${file.name} (file): ${(file.message ?? "").split("\n")[0]}`);
    }
  }
}
for (const root of ["packages", "tools"]) {
  for (const name of readdirSync(root)) {
    const manifest = join(root, name, "package.json");
    if (!existsSync(manifest)) continue;
    const scripts = JSON.parse(readFileSync(manifest, "utf8")).scripts ?? {};
    if (scripts.test && !reported.has(name)) {
      console.log(`${root}/${name}: no test report`);
      failed += 1;
    }
    // The whole-repository end-to-end tests report apart (tools/spec-compiler/vitest.e2e.config.ts).
    if (scripts["test:e2e"] && !reported.has(`${name}-e2e`)) {
      console.log(`${root}/${name}: no end-to-end test report`);
      failed += 1;
    }
  }
}
// A runner that crashed before reporting still failed the run.
if (Number(status) !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
