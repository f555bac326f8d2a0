import { packageTestConfig } from "../../vitest.shared.js";

export default packageTestConfig();
