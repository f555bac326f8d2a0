// A real backend for FUSE handlers: a directory on this machine serves every ask, optionally
// read-only. Used by tests here and meant as the provider's default (`--mount path=dir[:ro]`).
import { constants } from "node:fs";
import { chmod, chown, lstat, mkdir, open, readdir, rename, rmdir, truncate, unlink, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { FuseAckResult, FuseHandlers, FuseTime } from "./handlers.js";

export interface DirectoryHandlersOptions {
  /** Every mutation answered ReadOnly (the program sees EROFS). */
  readonly readonly?: boolean;
}

const message = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;
const missing = (error: unknown) => ["ENOENT", "ENOTDIR"].includes((error as NodeJS.ErrnoException).code ?? "");
const time = (ns: bigint): FuseTime => ({ secs: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) });
const seconds = (t: FuseTime) => Number(t.secs) + t.nanos / 1e9;

/**
 * Handlers serving `dir`: each ask's path (relative, `/`-separated) is a path under it. A path
 * with an empty, `.` or `..` component is refused (the proxy never sends one).
 */
export function directoryHandlers(dir: string, options: DirectoryHandlersOptions = {}): FuseHandlers {
  const at = (path: string) => {
    const parts = path === "" ? [] : path.split("/");
    if (parts.some((p) => p === "" || p === "." || p === "..")) throw new Error(`not a path: ${path}`);
    return join(dir, ...parts);
  };
  const mutate = async (run: () => Promise<unknown>): Promise<FuseAckResult> => {
    if (options.readonly) return { kind: "readOnly" };
    try {
      await run();
      return { kind: "ok" };
    } catch (error) {
      return { kind: "error", message: message(error) };
    }
  };
  return {
    async read(path, offset, length) {
      let handle;
      try {
        handle = await open(at(path), constants.O_RDONLY);
      } catch (error) {
        return missing(error) ? { kind: "missing" } : { kind: "error", message: message(error) };
      }
      try {
        const bytes = new Uint8Array(length);
        let filled = 0;
        while (filled < length) {
          const { bytesRead } = await handle.read(bytes, filled, length - filled, Number(offset) + filled);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
        return { kind: "data", bytes: bytes.subarray(0, filled) };
      } catch (error) {
        return { kind: "error", message: message(error) };
      } finally {
        await handle.close();
      }
    },
    write: (path, offset, bytes) =>
      mutate(async () => {
        const handle = await open(at(path), constants.O_WRONLY | constants.O_CREAT, 0o644);
        try {
          let written = 0;
          while (written < bytes.length) written += (await handle.write(bytes, written, bytes.length - written, Number(offset) + written)).bytesWritten;
        } finally {
          await handle.close();
        }
      }),
    async list(path) {
      try {
        const entries = await readdir(at(path), { withFileTypes: true });
        return { kind: "entries", entries: entries.map((e) => ({ name: e.name, kind: e.isDirectory() ? ("directory" as const) : ("file" as const) })) };
      } catch (error) {
        return missing(error) ? { kind: "missing" } : { kind: "error", message: message(error) };
      }
    },
    remove: (path) =>
      mutate(async () => {
        if ((await lstat(at(path))).isDirectory()) await rmdir(at(path));
        else await unlink(at(path));
      }),
    rename: (from, to) =>
      mutate(async () => {
        const target = await lstat(at(to)).catch(() => undefined);
        if (target?.isDirectory() && !(await lstat(at(from))).isDirectory()) throw Object.assign(new Error("a directory is there"), { code: "EISDIR" });
        await rename(at(from), at(to));
      }),
    mkdir: (path) => mutate(() => mkdir(at(path))),
    async stat(path) {
      try {
        const s = await lstat(at(path), { bigint: true });
        const directory = s.isDirectory();
        return {
          kind: "stat",
          stat: {
            kind: directory ? "directory" : "file",
            size: directory ? 0n : s.size,
            mode: Number(s.mode & 0o7777n),
            uid: Number(s.uid),
            gid: Number(s.gid),
            atime: time(s.atimeNs),
            mtime: time(s.mtimeNs),
            ctime: time(s.ctimeNs),
          },
        };
      } catch (error) {
        return missing(error) ? { kind: "missing" } : { kind: "error", message: message(error) };
      }
    },
    truncate: (path, size) =>
      mutate(async () => {
        await (await open(at(path), constants.O_WRONLY | constants.O_CREAT, 0o644)).close();
        await truncate(at(path), Number(size));
      }),
    setattr: (path, attrs) =>
      mutate(async () => {
        if (attrs.mode !== undefined) await chmod(at(path), attrs.mode);
        if (attrs.uid !== undefined || attrs.gid !== undefined) await chown(at(path), attrs.uid ?? -1, attrs.gid ?? -1);
        if (attrs.atime || attrs.mtime) {
          const now = await lstat(at(path));
          await utimes(at(path), attrs.atime ? seconds(attrs.atime) : now.atime, attrs.mtime ? seconds(attrs.mtime) : now.mtime);
        }
      }),
  };
}
