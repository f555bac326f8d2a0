// The compiler as a library: load and check a revision, build the IR, run the emitters.
export { loadSpecDir, placeOf, SpecError, SpecErrors, type LoadedSpec, type Place } from "./load.js";
export * from "./ir.js";
export { generateAll, findDrift, writeAll, listRevisions, compileRevision, compareRevisions, lineDiff, GENERATED_DIRS } from "./generate.js";
export type { GeneratedFile } from "./emit/project.js";
