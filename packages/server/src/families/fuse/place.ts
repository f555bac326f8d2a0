// Where a mount goes: the mount request's members and the place they name inside the proxy's root,
// shared by fuse::mount on the multiplexed connection and /fuse/mount on the paths transport. The
// place itself is found and made beneath the root by descriptor, in mount.ts (`placeMountPoint`).

/** The reason sent for an empty path or a component that is not a name (fs-fuse.md §3.3). */
export const NOT_A_MOUNT_PATH = "the path names the root, or has a component that is not a name";

/** `{"path": [string, …], "kind": "file" | "directory"}`, or undefined when a member is missing or mistyped. */
export function mountMembers(request: Record<string, unknown>): { path: string[]; kind: "file" | "directory" } | undefined {
  const { path, kind } = request;
  if (!Array.isArray(path) || !path.every((c) => typeof c === "string")) return undefined;
  if (kind !== "file" && kind !== "directory") return undefined;
  return { path: path as string[], kind };
}
