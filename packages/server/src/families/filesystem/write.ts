// filesystem::write and /filesystem/write: the new content arrives in pieces, goes to a temporary
// beside the destination, and is renamed over it only when whole. A write that fails or is
// abandoned leaves the destination unchanged and no temporary behind. The destination's directory
// is resolved beneath the root by descriptor (path-checks.ts) and held: the temporary is created,
// renamed and removed through it. Temporary names are random (128 bits), created O_EXCL and tried
// again on EEXIST, so a temporary left by a proxy that died mid-write never blocks a later write.
// Every temporary in flight is kept (its held directory and name) until its write ends, so a proxy
// that stops (removeTemporaries, from RunningProxy.close and the CLI's SIGINT/SIGTERM) removes them
// first; only temporaries this process made are ever removed, never a name found on disk.
import { randomBytes } from "node:crypto";
import { constants, unlinkSync } from "node:fs";
import { lstat, open, rename, unlink, type FileHandle } from "node:fs/promises";
import type { Place } from "@diverge/multiplexer/beneath";
import { beneathText, checkPath, FsError, openRoot, osText, PATH_NAMES_NO_FILE } from "./path-checks.js";

/** Attempts at a fresh temporary name before giving up (each collision is a 2^-128 event, or a planted file). */
const TEMPORARY_ATTEMPTS = 8;
/** The longest name a Linux filesystem takes, in bytes. */
const NAME_MAX = 255;

/** The temporaries of the writes in flight: each by the held descriptor of its directory and its name. */
const inFlight = new Set<{ readonly root: string; readonly dir: number; readonly name: string }>();

/**
 * Removes the temporary of every write still in flight, synchronously (it runs as the process
 * stops, even just before `process.exit`), each through its held directory descriptor and name.
 * Those writes then fail at their end (nothing to rename) and leave the destination unchanged.
 * With `root`, only those of writes prepared under that root (as given to prepareWrite: a proxy's
 * own, when several run in one process); without it, every one of this process. Returns how many
 * were removed.
 */
export function removeTemporaries(root?: string): number {
  let removed = 0;
  // Each stays in the set until its write ends (and releases its directory): removing it again is harmless.
  for (const temporary of inFlight) {
    if (root !== undefined && temporary.root !== root) continue;
    try {
      unlinkSync(`/proc/self/fd/${temporary.dir}/${temporary.name}`);
      removed++;
    } catch {
      // Already gone (renamed into place or removed by its write).
    }
  }
  return removed;
}

/** The opens (O_CREAT) of temporaries still running: a temporary they create is removed once they settle. */
const opening = new Set<Promise<unknown>>();

/** As removeTemporaries, after every open of a temporary still running has settled (for the last step of a stop). */
export async function settleTemporaries(root?: string): Promise<number> {
  while (opening.size > 0) await Promise.allSettled([...opening]);
  return removeTemporaries(root);
}

/** A fresh temporary name beside `name`: `.<name>.diverge-write-<32 hex>`, the name cut to fit NAME_MAX. */
export function temporaryName(name: string): string {
  const suffix = `.diverge-write-${randomBytes(16).toString("hex")}`;
  let stem = name;
  while (Buffer.byteLength(`.${stem}${suffix}`) > NAME_MAX) stem = [...stem].slice(0, -1).join("");
  return `.${stem}${suffix}`;
}

export interface WriteOptions {
  /** Abandons the write: the temporary is removed and the promise rejects with an `AbortError`. */
  readonly signal?: AbortSignal;
}

/** The content failed on the sender's side: the write is abandoned, and this value is its error. */
export class ContentError extends Error {
  constructor(readonly value: unknown) {
    super("the content ended in an error before the write was whole");
    this.name = "ContentError";
  }
}

/**
 * A write in two steps, as the endpoints need them: `prepare` checks the path and makes the
 * temporary (before the content channel opens), then `complete` streams the pieces in and publishes.
 */
export interface PreparedWrite {
  /** Takes every piece (none at all is a zero-byte file), then renames the temporary into place. */
  complete(pieces: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options?: WriteOptions): Promise<void>;
  /** Gives up: removes the temporary. Safe to call more than once, and after complete. */
  abandon(): Promise<void>;
}

/**
 * Checks the path and creates the temporary `.<name>.diverge-write-<random>` exclusively beside the
 * destination. Fails with FsError `path` (bad path) or `create` (parent missing or not a directory,
 * outside the root, or not creatable).
 */
export async function prepareWrite(root: string, path: unknown): Promise<PreparedWrite> {
  const components = checkPath(path);
  if (!components) throw new FsError("path", PATH_NAMES_NO_FILE);
  const beneath = await openRoot(root, "create");
  // The parent directory, held by descriptor and named through it (/proc/self/fd/N/…) from here on,
  // as openat/renameat would: a component swapped for a link at any time changes nothing.
  let dir: Place;
  try {
    dir = await beneath.parent(components, { follow: true });
  } catch (error) {
    throw new FsError("create", beneathText(error));
  } finally {
    await beneath.close().catch(() => undefined);
  }
  const destination = dir.path;
  let temporary = "";
  let handle: FileHandle | undefined;
  let held: { readonly root: string; readonly dir: number; readonly name: string } | undefined;
  try {
    for (let attempt = 1; !handle; attempt++) {
      const name = temporaryName(dir.name);
      temporary = `/proc/self/fd/${dir.dir}/${name}`;
      try {
        // Kept from before the open: a stop while it runs still removes what it creates.
        held = { root, dir: dir.dir, name };
        inFlight.add(held);
        const opened = open(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        opening.add(opened);
        try {
          handle = await opened;
        } finally {
          opening.delete(opened);
        }
      } catch (error) {
        inFlight.delete(held!);
        if ((error as NodeJS.ErrnoException).code === "EEXIST" && attempt < TEMPORARY_ATTEMPTS) continue;
        throw new FsError("create", osText(error));
      }
    }
  } catch (error) {
    await dir.release().catch(() => undefined);
    throw error;
  }
  let done = false;
  const release = async (removeTemporary: boolean) => {
    if (done) return;
    done = true;
    await handle!.close().catch(() => undefined);
    if (removeTemporary) await unlink(temporary).catch(() => undefined);
    // Forgotten only now, before its directory's descriptor is closed (and its number reused).
    inFlight.delete(held!);
    await dir.release().catch(() => undefined);
  };
  return {
    abandon: () => release(true),
    async complete(pieces, options = {}) {
      if (done) throw new FsError("write", "the write was abandoned");
      try {
        for await (const piece of pieces) {
          options.signal?.throwIfAborted();
          let written = 0;
          while (written < piece.length) {
            try {
              const { bytesWritten } = await handle!.write(piece, written, piece.length - written, null);
              written += bytesWritten;
            } catch (error) {
              throw new FsError("write", osText(error));
            }
          }
        }
        options.signal?.throwIfAborted();
        // Keep the permission bits of a regular file being replaced (a link there is replaced, not followed).
        const old = await lstat(destination).catch(() => undefined);
        if (old?.isFile()) await handle!.chmod(old.mode & 0o7777).catch(() => undefined);
        try {
          await handle!.close();
        } catch (error) {
          throw new FsError("write", osText(error));
        }
        try {
          await rename(temporary, destination);
        } catch (error) {
          throw new FsError("finish", osText(error));
        }
        await release(false);
      } catch (error) {
        await release(true);
        throw error;
      }
    },
  };
}

/** Prepare and complete at once. */
export async function writeFile(root: string, path: unknown, pieces: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options: WriteOptions = {}): Promise<void> {
  const prepared = await prepareWrite(root, path);
  await prepared.complete(pieces, options);
}
