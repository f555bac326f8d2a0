import { packageTestConfig } from "../../vitest.shared.js";

/**
 * The tests that copy or rebuild the repository and generate, build and run in the copy: each spawns
 * tsc and node for minutes of CPU. They run one file at a time, under a bound of their own, and turbo
 * starts them after the server and client suites (turbo.json), so they neither starve those suites
 * nor are starved by them.
 */
export const wholeRepositoryTests = ["test/bump-e2e.test.ts", "test/evolution.test.ts", "test/kind19-e2e.test.ts"];

// The bounds are hang guards: a whole generate-build-test cycle is minutes on a loaded two-core machine.
export default packageTestConfig({ include: wholeRepositoryTests, fileParallelism: false, testTimeout: 900_000, hookTimeout: 900_000 }, "spec-compiler-e2e");
