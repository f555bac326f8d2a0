import { packageTestConfig } from "../../vitest.shared.js";

export default packageTestConfig({ testTimeout: 120_000 });
