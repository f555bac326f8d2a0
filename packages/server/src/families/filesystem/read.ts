// filesystem::read and /filesystem/read: one file's bytes in pieces of at most 2,097,152 bytes,
// pulled one at a time so the caller's pace is the read's pace (a 1 GiB file never sits in memory).
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { checkPath, FsError, beneathText, openRoot, osText, PATH_NAMES_NO_FILE } from "./path-checks.js";

/** The most file bytes one piece carries (fs-fuse.md §7.2). */
export const CHUNK_SIZE = 2 * 1024 * 1024;

export interface ReadOptions {
  /** Ends the read early: the file is closed and the iteration ends with an `AbortError`. */
  readonly signal?: AbortSignal;
  /** Bytes per piece, at most CHUNK_SIZE (smaller only to test piecing). */
  readonly chunkSize?: number;
}

/**
 * The pieces of the file at `path` (components from the root `root`, a real path). A zero-byte file
 * is one empty piece. The file is found beneath the root by descriptor, links inside the root
 * followed (path-checks.ts). Fails with FsError `path` (bad path), `open` (cannot open, outside the root,
 * not a regular file) before any piece, or `read` after the pieces already yielded.
 */
export async function* readPieces(root: string, path: unknown, options: ReadOptions = {}): AsyncGenerator<Uint8Array, void, void> {
  const components = checkPath(path);
  if (!components) throw new FsError("path", PATH_NAMES_NO_FILE);
  options.signal?.throwIfAborted();
  const handle = await openBeneath(root, components);
  const size = Math.min(options.chunkSize ?? CHUNK_SIZE, CHUNK_SIZE);
  try {
    let sent = false;
    for (;;) {
      options.signal?.throwIfAborted();
      // A fresh buffer per piece: the caller may hold a piece (queued on a socket) while we read on.
      const buffer = new Uint8Array(size);
      let filled = 0;
      try {
        while (filled < size) {
          const { bytesRead } = await handle.read(buffer, filled, size - filled, null);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
      } catch (error) {
        throw new FsError("read", osText(error));
      }
      if (filled === 0 && sent) return;
      sent = true;
      yield filled === size ? buffer : buffer.subarray(0, filled);
      if (filled < size) return;
    }
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * Opens an existing regular file for reading, resolved beneath the root by descriptor with links
 * inside the root followed; the last step opens the held directory's entry with O_NOFOLLOW, so
 * what is opened is what was resolved. FsError `open` when it cannot be opened, lies outside the
 * root, or is not a regular file.
 */
async function openBeneath(root: string, components: readonly string[]): Promise<FileHandle> {
  const beneath = await openRoot(root, "open");
  let handle: FileHandle;
  try {
    const place = await beneath.resolve(components, { follow: true }).catch((error: unknown) => {
      throw new FsError("open", beneathText(error));
    });
    try {
      // O_NONBLOCK: a FIFO swapped in cannot hold the open.
      handle = await open(place.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((error: unknown) => {
        throw new FsError("open", osText(error));
      });
    } finally {
      await place.release();
    }
  } finally {
    await beneath.close().catch(() => undefined);
  }
  try {
    if (!(await handle.stat()).isFile()) throw new FsError("open", "not a regular file");
    return handle;
  } catch (error) {
    await handle.close().catch(() => undefined);
    if (error instanceof FsError) throw error;
    throw new FsError("open", osText(error));
  }
}
