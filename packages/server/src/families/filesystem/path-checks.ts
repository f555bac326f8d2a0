// Paths of the filesystem endpoints (fs-fuse.md §2): arrays of components from the container root,
// checked exactly, and resolved so that nothing outside the root is ever read, written or listed.
//
// Guarantees (Linux):
// - A path is refused unless it is a non-empty array whose every component is a non-empty string
//   other than `.` and `..` without `/` or NUL. No `..` encoding gets further: components are never
//   decoded, only compared.
// - Every path is resolved beneath the root by descriptor, with no window between check and use
//   (`@diverge/multiplexer/beneath`): component by component from a held descriptor of the root,
//   each step opened with O_NOFOLLOW relative to the previous one, and the final operation acting on
//   a held directory plus one name with a call that does not follow a link there. A program that
//   swaps a directory for a link at any moment (renameat2 RENAME_EXCHANGE in a loop) can make a
//   request fail, never act outside the root.
// - Read: links inside the root are followed (relative targets from the link's own directory, `..`
//   never above the root, absolute targets only under the root's real path); a link leading outside
//   is refused. Write: links in the parent directories are followed the same way; a link at the
//   destination itself is replaced, never written through. Tree: links are listed as Symlink
//   entries and never followed.
// - Error texts name no host path: an OS error is its errno text, and any text quoting the root's
//   host path names the container path instead (`containerText`).
import { constants as osConstants } from "node:os";
import { Beneath, BeneathError } from "@diverge/multiplexer/beneath";
import { realpath } from "node:fs/promises";
import { sep } from "node:path";

/** A failure of a filesystem endpoint: the `kind` and `error` members of the JSON error the proxy sends. */
export class FsError extends Error {
  /**
   * The errno name (`ENOENT`, `EACCES`, `ENOTDIR`, …) when `error` is an OS error's text (`No such
   * file or directory (os error 2)`), else undefined. Read from the text, so it is what the
   * provider's `FilesystemError.code` reads from the same text; never sent (the wire carries `kind`
   * and `error` only, fs-fuse.md §2).
   */
  readonly code: string | undefined;
  constructor(
    readonly kind: string,
    readonly error: string,
  ) {
    super(`${kind}: ${error}`);
    this.name = "FsError";
    this.code = errnoOfText(error);
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

/** The root, resolved once: a real path (the operator's choice: links in it are followed). */
export async function realRoot(root: string): Promise<string> {
  return realpath(root);
}

/** Whether `real` (a real path) is the root or lies under it. */
export function inside(root: string, real: string): boolean {
  if (root === sep) return real.startsWith(sep);
  return real === root || real.startsWith(root + sep);
}

export const OUTSIDE_ROOT = "the path leads outside the root";

/** A resolution failure's text: the errno's text, or that the path leads outside the root. */
export function beneathText(error: unknown): string {
  if (error instanceof BeneathError) return error.code === "EOUTSIDE" ? OUTSIDE_ROOT : osText({ code: error.code } as NodeJS.ErrnoException);
  return osText(error);
}

/**
 * `text` with every host path under `root` (a real path) named as the container sees it: the root
 * itself is `/`. For texts that are not ours (a watcher's), so that no host path reaches a provider.
 */
export function containerText(root: string, text: string): string {
  if (root === sep) return text;
  return text.split(root + sep).join(sep).split(root).join(sep);
}

/** Opens the root (its real path) for one request; FsError `kind` when it cannot be opened. */
export async function openRoot(root: string, kind: string): Promise<Beneath> {
  try {
    return await Beneath.open(root);
  } catch (error) {
    throw new FsError(kind, `the root cannot be opened: ${osText(error)}`);
  }
}

/** The OS error's text as Rust would print it, e.g. `No such file or directory (os error 2)`. */
export function osText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  const code = e.code ?? "EIO";
  const text = OS_TEXT[code];
  const errno = Math.abs(e.errno ?? (osConstants.errno as Record<string, number>)[code] ?? 0);
  // Never the error's own message: Node's quotes the host path it was given.
  return `${text ?? code} (os error ${errno})`;
}

/** errno number → name on this machine (the first of two names for one number, as Node's `code` gives it: EAGAIN, ENOTSUP). */
const ERRNO_NAMES = new Map<number, string>();
for (const [name, number] of Object.entries(osConstants.errno as Record<string, number>)) if (!ERRNO_NAMES.has(number)) ERRNO_NAMES.set(number, name);

/** The errno name of an OS error's text as `osText` writes it (`… (os error N)` at its end), or undefined. */
export function errnoOfText(text: string): string | undefined {
  const found = /\(os error (\d+)\)$/.exec(text);
  return found ? ERRNO_NAMES.get(Number(found[1])) : undefined;
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

