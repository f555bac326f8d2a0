// filesystem::read and /filesystem/read: one file's bytes in pieces of at most 2,097,152 bytes,
// pulled one at a time so the caller's pace is the read's pace (a 1 GiB file never sits in memory).
import { checkPath, FsError, openInside, osText, PATH_NAMES_NO_FILE } from "./path-checks.js";

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
 * is one empty piece. Fails with FsError `path` (bad path), `open` (cannot open, outside the root,
 * not a regular file) before any piece, or `read` after the pieces already yielded.
 */
export async function* readPieces(root: string, path: unknown, options: ReadOptions = {}): AsyncGenerator<Uint8Array, void, void> {
  const components = checkPath(path);
  if (!components) throw new FsError("path", PATH_NAMES_NO_FILE);
  options.signal?.throwIfAborted();
  const handle = await openInside(root, components);
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
