// Paths of the filesystem endpoints (fs-fuse.md §2): arrays of components from the container root,
// checked exactly, and resolved so that nothing outside the root is ever read or written.
//
// Guarantees (Linux):
// - A path is refused unless it is a non-empty array whose every component is a non-empty string
//   other than `.` and `..` without `/` or NUL. No `..` encoding gets further: components are never
//   decoded, only compared.
// - Symbolic links inside the root are followed where the OS would follow them, but a path whose
//   real location (every link resolved) is outside the root is refused, whatever the links point to.
// - Every file this module opens is checked after opening: the kernel's own name for the open file
//   (`/proc/self/fd/N`) must lie inside the root. A component swapped for a symlink between the
//   check and the open is therefore caught: the open file is closed unread (or, for a temporary we
//   created, removed) and the request fails. A file opened for reading is opened with the final
//   component resolved beforehand and `O_NOFOLLOW`, so a swap there fails the open itself.
// - A write pins the destination's directory with a descriptor once it is checked, and creates,
//   renames and removes its temporary through that descriptor (`/proc/self/fd/N/name`, as
//   openat/renameat would): swapping a component for a link afterwards changes nothing. Only moving
//   the checked directory itself out of the root while the write is in flight would take the write
//   with it; no path the request names can.
import { constants } from "node:fs";
import { open, readlink, realpath, type FileHandle } from "node:fs/promises";
import { join, sep } from "node:path";

/** A failure of a filesystem endpoint: the `kind` and `error` members of the JSON error the proxy sends. */
export class FsError extends Error {
  constructor(
    readonly kind: string,
    readonly error: string,
  ) {
    super(`${kind}: ${error}`);
    this.name = "FsError";
  }
  /** The JSON value the multiplexed endpoints send: `{"kind":…,"error":…}` in that order. */
  toJSON(): { kind: string; error: string } {
    return { kind: this.kind, error: this.error };
  }
}

export const PATH_NAMES_NO_FILE = "path names no file";

/** Whether one component is a name: non-empty, not `.` or `..`, no `/`, no NUL. */
export function isName(component: unknown): component is string {
  return typeof component === "string" && component.length > 0 && component !== "." && component !== ".." && !component.includes("/") && !component.includes("\0");
}

/** The components of a path naming a file, or undefined when it is empty or any component is not a name. */
export function checkPath(path: unknown): string[] | undefined {
  if (!Array.isArray(path) || path.length === 0) return undefined;
  return path.every(isName) ? [...(path as string[])] : undefined;
}

/** The root, resolved once: every later check compares real paths against it. */
export async function realRoot(root: string): Promise<string> {
  return realpath(root);
}

/** Whether `real` (a real path) is the root or lies under it. */
export function inside(root: string, real: string): boolean {
  if (root === sep) return real.startsWith(sep);
  return real === root || real.startsWith(root + sep);
}

/** The OS error's text as Rust would print it, e.g. `No such file or directory (os error 2)`. */
export function osText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  const text = OS_TEXT[e.code ?? ""];
  return text ? `${text} (os error ${Math.abs(e.errno ?? 0)})` : (e.message ?? String(error));
}

const OS_TEXT: Record<string, string> = {
  ENOENT: "No such file or directory",
  EACCES: "Permission denied",
  EISDIR: "Is a directory",
  ENOTDIR: "Not a directory",
  EEXIST: "File exists",
  ELOOP: "Too many levels of symbolic links",
  ENOSPC: "No space left on device",
  EROFS: "Read-only file system",
  EPERM: "Operation not permitted",
  ENAMETOOLONG: "File name too long",
  EIO: "Input/output error",
  EXDEV: "Invalid cross-device link",
  ENOTEMPTY: "Directory not empty",
};

/** Where an open file really is, as the kernel names it. */
export async function whereOpen(handle: FileHandle): Promise<string> {
  const name = await readlink(`/proc/self/fd/${handle.fd}`);
  return name.endsWith(" (deleted)") ? name.slice(0, -" (deleted)".length) : name;
}

/**
 * Opens an existing file for reading, following links inside the root only. Throws FsError
 * `open` when it cannot be opened, lies outside the root, or is not a regular file.
 */
export async function openInside(root: string, components: readonly string[]): Promise<FileHandle> {
  let real: string;
  try {
    real = await realpath(join(root, ...components));
  } catch (error) {
    throw new FsError("open", osText(error));
  }
  if (!inside(root, real)) throw new FsError("open", "the path leads outside the root");
  let handle: FileHandle;
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw new FsError("open", osText(error));
  }
  try {
    if (!inside(root, await whereOpen(handle))) throw new FsError("open", "the path leads outside the root");
    if (!(await handle.stat()).isFile()) throw new FsError("open", "not a regular file");
    return handle;
  } catch (error) {
    await handle.close().catch(() => undefined);
    if (error instanceof FsError) throw error;
    throw new FsError("open", osText(error));
  }
}

/** The real directory a new file named by `components` goes into, checked to lie inside the root. */
export async function parentInside(root: string, components: readonly string[], kind: string): Promise<string> {
  let real: string;
  try {
    real = await realpath(join(root, ...components.slice(0, -1)));
  } catch (error) {
    throw new FsError(kind, osText(error));
  }
  if (!inside(root, real)) throw new FsError(kind, "the path leads outside the root");
  return real;
}
