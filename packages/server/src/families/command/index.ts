// command: a command the program asks the provider to run, its items streamed back, through the
// program port's `POST /command` (paths.ts); `/requests` kind 10 only (no begin-scope channel carries
// it in this revision). Spec: spec/2.3.0/command.yaml, requests.yaml; ../shared/protocol/paths.md §5.
export { CommandApi } from "./paths.js";
