// Where a mount goes: the mount request's members and the place they name inside the proxy's root,
// shared by fuse::mount on the multiplexed connection and /fuse/mount on the paths transport.
import { lstat, realpath } from "node:fs/promises";
import { join } from "node:path";
import { inside } from "../filesystem/path-checks.js";

/** The reason sent for an empty path or a component that is not a name (fs-fuse.md §3.3). */
export const NOT_A_MOUNT_PATH = "the path names the root, or has a component that is not a name";

/** `{"path": [string, …], "kind": "file" | "directory"}`, or undefined when a member is missing or mistyped. */
export function mountMembers(request: Record<string, unknown>): { path: string[]; kind: "file" | "directory" } | undefined {
  const { path, kind } = request;
  if (!Array.isArray(path) || !path.every((c) => typeof c === "string")) return undefined;
  if (kind !== "file" && kind !== "directory") return undefined;
  return { path: path as string[], kind };
}

/**
 * Where `components` lead under `root`, with every existing component's links resolved and checked
 * to stay inside the root; what does not exist yet is made (inside) by the mount. Undefined when a
 * link leads out.
 */
export async function placeInside(root: string, components: readonly string[]): Promise<string | undefined> {
  let at = root;
  for (let i = 0; i < components.length; i++) {
    const next = join(at, components[i]!);
    const stats = await lstat(next).catch(() => undefined);
    if (!stats) return join(next, ...components.slice(i + 1));
    const real = stats.isSymbolicLink() ? await realpath(next).catch(() => undefined) : next;
    if (!real || !inside(root, real)) return undefined;
    at = real;
  }
  return at;
}

