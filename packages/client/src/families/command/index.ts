// The command family: the program asks the provider to run a command and reads its output as a
// stream of items, answered through the generated dispatch; this folder holds the executable-backed
// answerer. Defined by spec/2.3.0/command.yaml and ../shared/protocol/paths.md §5 (/requests kind 10,
// /command/{channel}).
export { commandExec, STDERR_TAIL_BYTES } from "./exec.js";
