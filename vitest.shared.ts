// Every package's vitest config starts here, so CI can collect one JSON report per package and
// print the closing "N passed, N failed" line.
import { basename } from "node:path";
import { defineConfig, type ViteUserConfig } from "vitest/config";

export function packageTestConfig(test: NonNullable<ViteUserConfig["test"]> = {}, name = basename(process.cwd())): ViteUserConfig {
  const reportDir = process.env.DIVERGE_TEST_REPORT_DIR;
  return defineConfig({
    test: {
      include: ["test/**/*.test.ts"],
      // Tests assert behaviour, not speed: on a loaded two-core CI machine a spawned process or a
      // real server can take seconds to start (a test that spawns six CLI runs took over 30 s beside
      // two other CI runs), so the bound is a hang guard, not a speed limit.
      testTimeout: 120_000,
      hookTimeout: 120_000,
      reporters: reportDir ? ["default", ["json", { outputFile: `${reportDir}/${name}.json` }]] : ["default"],
      ...test,
    },
  });
}
