// Processes the provider starts for a backend (a command's executable, a stdio MCP server) run each in
// a process group of its own (a session, `detached`), so that ending one ends what it left behind: a
// shell script's children would otherwise outlive it and hold its pipes open. Groups still alive when
// this process exits are SIGKILLed on the way out.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";

/** How often a group given SIGTERM is checked for having gone. */
const GROUP_POLL_MS = 25;

/** The groups still running, by their leader's pid. */
const liveGroups = new Set<number>();
let exitHooked = false;

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on("exit", () => {
    for (const group of liveGroups) signalGroup(group, "SIGKILL");
  });
}

/** False once the group has no process left. */
function signalGroup(group: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-group, signal);
    return true;
  } catch {
    return false;
  }
}

/** Spawns `command` as the leader of a new process group, tracked until {@link endGroup}. */
export function spawnInGroup(command: string, args: readonly string[], options: Omit<SpawnOptions, "detached">): ChildProcess {
  hookExit();
  const child = spawn(command, [...args], { ...options, detached: true });
  if (child.pid !== undefined) liveGroups.add(child.pid);
  return child;
}

/**
 * Ends the group `child` leads: SIGTERM now, SIGKILL after `graceMs` to whatever is left. Resolves once
 * the group is gone or the SIGKILL is sent; never keeps the provider alive on its own.
 */
export function endGroup(child: ChildProcess, graceMs: number): Promise<void> {
  const group = child.pid;
  if (group === undefined || !liveGroups.has(group)) return Promise.resolve();
  if (!signalGroup(group, "SIGTERM")) {
    liveGroups.delete(group);
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const started = Date.now();
    // Not what keeps the provider alive: a provider exiting first SIGKILLs the group on its way out.
    const poll = setInterval(() => {
      if (signalGroup(group, 0) && Date.now() - started < graceMs) return;
      clearInterval(poll);
      liveGroups.delete(group);
      signalGroup(group, "SIGKILL");
      resolve();
    }, Math.min(GROUP_POLL_MS, graceMs));
    poll.unref();
  });
}
