import { configDefaults } from "vitest/config";
import { packageTestConfig } from "../../vitest.shared.js";
import { wholeRepositoryTests } from "./vitest.e2e.config.js";

// Compiler tests run the real CLI on copies of the spec: a few seconds each on a quiet machine, minutes
// under CI's full load; the timeout is a hang guard. The whole-repository end-to-end tests run on
// their own (`pnpm test:e2e`, vitest.e2e.config.ts).
export default packageTestConfig({ testTimeout: 300_000, exclude: [...configDefaults.exclude, ...wholeRepositoryTests] });
