import { packageTestConfig } from "../../vitest.shared.js";

// Compiler tests run the real CLI on copies of the spec; each run takes a few seconds.
export default packageTestConfig({ testTimeout: 300_000 });
