import { packageTestConfig } from "../../vitest.shared.js";

export default packageTestConfig({ testTimeout: 30_000, hookTimeout: 30_000 });
