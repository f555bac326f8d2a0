// The browser page's script (bundled by esbuild for platform "browser"): fetches the vectors, runs
// them through @diverge/codec, and leaves the report where the test reads it.
import { parseVectors, runVectors } from "./vectors.mjs";

async function main() {
  const response = await fetch("./vectors.jsonl");
  const report = runVectors(parseVectors(await response.text()));
  document.querySelector("#result").textContent = `${report.passed} passed, ${report.failed} failed`;
  globalThis.dvReport = report;
}

main().catch((error) => {
  globalThis.dvReport = { total: 0, passed: 0, failed: 1, failures: [{ name: "page", problem: String(error?.stack ?? error) }] };
});
