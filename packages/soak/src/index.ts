export { runSoak, random, type SoakOptions, type SoakReport } from "./soak.js";
export { FaultyProvider, PATH_FAULT_WEIGHTS, TERMINAL_PATH_FAULTS, type PathFault, type HandledAsk } from "./paths.js";
export { runRelaySoak, type RelaySoakOptions, type RelaySoakReport, type RelaySample } from "./relay.js";
export { runFamilySoak, runFamilyScenario, FAMILY_SCENARIOS, type FamilyScenario, type FamilySoakOptions, type FamilySoakReport, type ScenarioReport, type RssFigures } from "./families.js";
