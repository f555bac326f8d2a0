// The members of the filesystem requests (fs-fuse.md §2, serde rules): the codec checks only that
// each is a JSON object, so `{}` decodes; a missing or mistyped required member makes the request
// unreadable (a bare finish on a scope, a clean close on a path). Unknown members are ignored.

/** `{"ignore": [[string, …], …]}`: the ignore list, or undefined when the member is missing or mistyped. */
export function treeMembers(request: Record<string, unknown>): { ignore: string[][] } | undefined {
  const ignore = request.ignore;
  if (!Array.isArray(ignore)) return undefined;
  if (!ignore.every((entry) => Array.isArray(entry) && entry.every((c) => typeof c === "string"))) return undefined;
  return { ignore: ignore as string[][] };
}

/** `{"path": [string, …]}`: the path (not yet checked as a name), or undefined when missing or mistyped. */
export function pathMembers(request: Record<string, unknown>): { path: string[] } | undefined {
  const path = request.path;
  if (!Array.isArray(path) || !path.every((c) => typeof c === "string")) return undefined;
  return { path: path as string[] };
}
