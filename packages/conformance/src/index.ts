export { answer, toView, fromView } from "./testee.js";
export { registry } from "./gen/registry.js";
export type { FrameEntry } from "./entry.js";
