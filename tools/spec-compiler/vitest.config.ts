import { packageTestConfig } from "../../vitest.shared.js";

// Compiler tests run the real CLI on copies of the spec: a few seconds each on a quiet machine, minutes
// under CI's full load; the timeout is a hang guard.
export default packageTestConfig({ testTimeout: 300_000 });
