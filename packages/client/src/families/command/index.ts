// The command family: the program asks the provider to run a command and reads its output as a
// stream of items; this folder holds the executable-backed answerer (exec.ts) and the paths adapter
// that sends its items as the path drains (paths.ts). Defined by spec/2.3.0/command.yaml and ../shared/protocol/paths.md §5 (/requests kind 10,
// /command/{channel}).
export { commandExec, DEFAULT_KILL_GRACE_MS, STDERR_TAIL_BYTES, type CommandContext, type CommandExecOptions } from "./exec.js";
export { commandPaths, COMMAND_SEND_HIGH_WATER_BYTES } from "./paths.js";
