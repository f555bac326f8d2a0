import { packageTestConfig } from "../../vitest.shared.js";

// Packing, one npm install (in the global setup, shared by every file) and a browser take longer
// than unit tests.
export default packageTestConfig({
  globalSetup: ["test/global-setup.ts"],
  testTimeout: 240_000,
  hookTimeout: 240_000,
});
