// Every package's vitest config starts here, so CI can collect one JSON report per package and
// print the closing "N passed, N failed" line.
import { basename } from "node:path";
import { defineConfig, type ViteUserConfig } from "vitest/config";

export function packageTestConfig(test: NonNullable<ViteUserConfig["test"]> = {}): ViteUserConfig {
  const reportDir = process.env.DIVERGE_TEST_REPORT_DIR;
  const name = basename(process.cwd());
  return defineConfig({
    test: {
      include: ["test/**/*.test.ts"],
      reporters: reportDir ? ["default", ["json", { outputFile: `${reportDir}/${name}.json` }]] : ["default"],
      ...test,
    },
  });
}
