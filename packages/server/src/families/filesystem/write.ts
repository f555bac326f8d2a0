// filesystem::write and /filesystem/write: the new content arrives in pieces, goes to a temporary
// beside the destination, and is renamed over it only when whole. A write that fails or is
// abandoned leaves the destination unchanged and no temporary behind.
import { constants } from "node:fs";
import { lstat, open, rename, unlink, type FileHandle } from "node:fs/promises";
import { checkPath, FsError, inside, osText, parentInside, PATH_NAMES_NO_FILE, whereOpen } from "./path-checks.js";

let counter = 0;

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
 * Checks the path and creates the temporary `.<name>.diverge-write-<n>` exclusively beside the
 * destination. Fails with FsError `path` (bad path) or `create` (parent missing or not a directory,
 * outside the root, or not creatable).
 */
export async function prepareWrite(root: string, path: unknown): Promise<PreparedWrite> {
  const components = checkPath(path);
  if (!components) throw new FsError("path", PATH_NAMES_NO_FILE);
  const name = components[components.length - 1]!;
  const parent = await parentInside(root, components, "create");
  // The parent directory is pinned by a descriptor and named through it (/proc/self/fd/N/…) from
  // here on, as openat/renameat would: a component swapped for a link later changes nothing.
  let dir: FileHandle;
  try {
    dir = await open(parent, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    throw new FsError("create", osText(error));
  }
  let handle: FileHandle | undefined;
  const at = `/proc/self/fd/${dir.fd}`;
  const temporary = `${at}/.${name}.diverge-write-${++counter}`;
  const destination = `${at}/${name}`;
  try {
    if (!inside(root, await whereOpen(dir))) throw new FsError("create", "the path leads outside the root");
    try {
      handle = await open(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    } catch (error) {
      throw new FsError("create", osText(error));
    }
  } catch (error) {
    await dir.close().catch(() => undefined);
    throw error;
  }
  let done = false;
  const release = async (removeTemporary: boolean) => {
    if (done) return;
    done = true;
    await handle!.close().catch(() => undefined);
    if (removeTemporary) await unlink(temporary).catch(() => undefined);
    await dir.close().catch(() => undefined);
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
