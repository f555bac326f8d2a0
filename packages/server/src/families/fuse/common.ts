// What both transports' FUSE adapters and the CLI share without loading the binding: the errno a
// provider's error message names, the open-file sessions a transport may keep (mount.ts calls
// them), and the cache levels (`--fuse-cache`).
import type { FuseAckResult, FuseReadResult } from "@diverge/multiplexer/fuse";

const NAMED_ERRNOS: Readonly<Record<string, number>> = {
  EPERM: -1, ENOENT: -2, EACCES: -13, EBUSY: -16, EEXIST: -17, EXDEV: -18, ENOTDIR: -20, EISDIR: -21, EINVAL: -22,
  EFBIG: -27, ENOSPC: -28, EROFS: -30, EMLINK: -31, ENAMETOOLONG: -36, ENOTEMPTY: -39, ELOOP: -40, EDQUOT: -122,
};

/**
 * The errno a provider's error message names, in the documented form: the message begins with the
 * errno's name, alone or followed by `:` or a space (`ENOTEMPTY`, `EEXIST: file exists`), which is
 * what the provider's directory backend writes (Node's `error.code`). Any other message is EIO.
 */
export function errnoOfMessage(message: string): number {
  const name = /^(E[A-Z]+)(?:$|[: ])/.exec(message)?.[1];
  return (name !== undefined && NAMED_ERRNOS[name]) || -5;
}

/**
 * What a transport holding a proxy copy of each open file does at open, flush and release (the
 * paths transport: whole files). Each answers 0 or a negative errno. `fh` is the descriptor the
 * mount gave the open: what is done through it acts on the copy that open got, even when a later
 * open of the same path holds another (the kernel's release of a closed descriptor may come after
 * the next open).
 */
export interface FileSessions {
  /** An open of `path` as descriptor `fh` (`created`: it was just made, empty). EFBIG when the file cannot be carried. */
  open(path: string, created: boolean, fh: number): Promise<number>;
  /** flush(2)/fsync(2) of `fh`: what was written is sent. */
  flush(path: string, fh: number): Promise<number>;
  /** The last close of the open `fh`: sent if changed, and the copy dropped when no open is left. */
  release(path: string, fh: number): Promise<number>;
  /** A read, write or truncate through the open `fh`: on its copy. */
  read(path: string, fh: number, offset: bigint, length: number): Promise<FuseReadResult>;
  write(path: string, fh: number, offset: bigint, bytes: Uint8Array): Promise<FuseAckResult>;
  truncate(path: string, fh: number, size: bigint): Promise<FuseAckResult>;
  /** The size the open copy has now, when there is one (a stat then reports it). */
  sizeOf(path: string): bigint | undefined;
}

/**
 * How much the kernel may cache of a mount (the proxy's `--fuse-cache`), its consistency model:
 * - `none`: nothing cached; every read, lookup and stat is asked (direct I/O: no page cache, so a
 *   shared `mmap` fails with ENODEV). For a provider whose files change under the mount all the time.
 * - `close-to-open` (the default): attributes and names cached for 1 s, file pages in the page
 *   cache; an open re-stats the file once its attributes' 1 s has passed and drops its cached pages
 *   when its size or modification time changed (libfuse's `auto_cache`; on paths, pages are dropped
 *   at every open). A change the provider makes is seen by the next open and by a stat once that
 *   second has passed; a file created by the provider is seen at once (no negative cache).
 * - `full`: attributes and names cached for 60 s, pages kept across opens (`kernel_cache`): for a
 *   provider whose directory changes only through this mount.
 */
export type FuseCacheLevel = "none" | "close-to-open" | "full";
export const FUSE_CACHE_LEVELS: readonly FuseCacheLevel[] = ["none", "close-to-open", "full"];
let chosenLevel: FuseCacheLevel | undefined;
/** The level of a mount that names none: the proxy's `--fuse-cache` when given, else `close-to-open`. */
export const defaultFuseCache = (): FuseCacheLevel => chosenLevel ?? "close-to-open";
/** The cache level of every later mount that does not name one (the proxy's `--fuse-cache`); undefined restores the default. */
export function setDefaultFuseCache(level: FuseCacheLevel | undefined): void {
  chosenLevel = level;
}
