// A real kernel FUSE filesystem at a path whose every operation is one typed ask (handlers.ts).
// Binding: fuse-native 2.2.6 (prebuilt N-API binary in the npm package; it links libfuse.so.2,
// Debian's `libfuse2`). Errno mapping exactly as fs-fuse.md §4.1: an error answer, a failed or
// unserved ask → EIO; ReadOnly → EROFS; Missing → ENOENT.
//
// Known bug of the binding (fuse-native 2.2.6, fuse-native.c `FUSE_METHOD_VOID(utimens, …)`): it
// hands JavaScript the access time twice (`FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)` where `l->mtime`
// was meant), so a program's modification time would be lost. Worked around in `withTrueMtime`:
// the modification time is read from the binding's own per-thread record, which it fills correctly.
import { execFile, execFileSync } from "node:child_process";
import { constants as fsConstants, existsSync } from "node:fs";
import { mkdir, open, readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { FUSE_CHUNK_SIZE, type FuseAckResult, type FuseAttrs, type FuseHandlers, type FuseStat, type FuseTime } from "@diverge/multiplexer/fuse";

// Made on first use: in the proxy's one-file bundle this module may run as CommonJS, where
// `import.meta.url` is undefined; the binding is then looked for from the working directory (and,
// absent there, the mount is refused with the reason).
let requireHere: NodeRequire | undefined;
const require = Object.assign((id: string) => here()(id), { resolve: (id: string) => here().resolve(id) });
function here(): NodeRequire {
  return (requireHere ??= createRequire(import.meta.url ?? `${process.cwd()}/`));
}

// errno values as fuse-native wants them (negative).
const EIO = -5;
const ENOENT = -2;
const EROFS = -30;
const ENOSYS = -38;

type Cb = (code: number, ...rest: unknown[]) => void;
type FuseCtor = new (mnt: string, ops: Record<string, unknown>, opts: Record<string, unknown>) => FuseInstance;
interface FuseInstance {
  mount(cb: (error: Error | null) => void): void;
  unmount(cb: (error: Error | null) => void): void;
  _open(cb: (error: Error | null) => void): void;
}

/** Why FUSE cannot be used on this machine, or undefined when it can. */
export function fuseUnavailable(): string | undefined {
  if (!existsSync("/dev/fuse")) return "this machine has no /dev/fuse";
  try {
    loadFuse();
  } catch (error) {
    return `the FUSE binding does not load: ${(error as Error).message}`;
  }
  return undefined;
}

let fuseClass: FuseCtor | undefined;
function loadFuse(): FuseCtor {
  if (fuseClass) return fuseClass;
  const Fuse = require("fuse-native") as FuseCtor;
  // The binding itself, as fuse-native loads it (same file, so the same module instance).
  const fuseRequire = createRequire(require.resolve("fuse-native"));
  const binding = fuseRequire("node-gyp-build")(dirname(require.resolve("fuse-native"))) as {
    fuse_native_mount: (...args: unknown[]) => void;
  };
  /**
   * fuse-native refuses any mount point but a directory; a FUSE filesystem whose root is a file may
   * be mounted on a file (the kernel takes the root's type from the mount point). The same open as
   * fuse-native 2.2.6's `_open`, without that check and without its mkdir/force steps.
   */
  class AnyMountPoint extends (Fuse as unknown as new (...args: unknown[]) => Record<string, any>) {
    _open(cb: (error: Error | null) => void): void {
      const op = (binding as unknown as { op_utimens: number }).op_utimens;
      this._handlers[op] = withTrueMtime(this._handlers[op]);
      this._thread = Buffer.alloc((binding as unknown as { sizeof_fuse_thread_t: number }).sizeof_fuse_thread_t);
      this._openCallback = cb;
      try {
        binding.fuse_native_mount(this.mnt, this._fuseOptions(), this._thread, this, this._malloc, this._handlers, this._getImplementedArray());
      } catch (error) {
        cb(error as Error);
      }
    }
  }
  fuseClass = AnyMountPoint as unknown as FuseCtor;
  return fuseClass;
}

/**
 * The byte offsets of `atime` and `mtime` (both `size_t`, milliseconds) in fuse-native 2.2.6's
 * `fuse_thread_locals_t` on a 64-bit Linux: self 0, op 8, op_fn 16, path 24, dest 32, linkname 40,
 * info 48, buf 56, offset 64, len 72, mode 80, dev 88, uid 96, gid 100, atime 104, mtime 112.
 */
const LOCALS_ATIME = 104;
const LOCALS_MTIME = 112;

/**
 * fuse-native 2.2.6's utimens handler as the binding calls it — `(locals, op, path, atimeLow,
 * atimeHigh, mtimeLow, mtimeHigh)` where the "mtime" halves are the access time again — given the
 * true modification time. `locals` is the Buffer holding the calling FUSE thread's record, which the
 * binding filled from the kernel's two timespecs before calling; the access time found there is
 * checked against the one passed, so a binding whose record is laid out otherwise is left as it is.
 */
export function withTrueMtime(handler: (...args: any[]) => unknown): (...args: any[]) => unknown {
  return (locals: unknown, op: unknown, path: unknown, atimeLow: number, atimeHigh: number, mtimeLow: number, mtimeHigh: number, ...rest: unknown[]) => {
    if (Buffer.isBuffer(locals) && locals.length >= LOCALS_MTIME + 8 && process.arch !== "ia32" && process.arch !== "arm") {
      const atime = BigInt(atimeHigh >>> 0) * 0x1_0000_0000n + BigInt(atimeLow >>> 0);
      if (locals.readBigUInt64LE(LOCALS_ATIME) === atime) {
        const mtime = locals.readBigUInt64LE(LOCALS_MTIME);
        mtimeLow = Number(mtime & 0xffff_ffffn);
        mtimeHigh = Number(mtime >> 32n);
      }
    }
    return handler(locals, op, path, atimeLow, atimeHigh, mtimeLow, mtimeHigh, ...rest);
  };
}

export interface MountOptions {
  /** Where, as an absolute path on this machine. Missing parents are made. */
  readonly path: string;
  /** One regular file, or a directory tree. */
  readonly kind: "file" | "directory";
  readonly handlers: FuseHandlers;
}

export interface FuseMount {
  readonly path: string;
  /** Answers every operation still waiting with EIO, unmounts, and resolves when the mount is gone. */
  close(): Promise<void>;
}

/** The error a mount fails with; `message` is the reason the proxy sends (`mount: …`). */
export class MountError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MountError";
  }
}

const toDate = (t: FuseTime) => new Date(Number(t.secs) * 1000 + Math.floor(t.nanos / 1e6));
const toTime = (ms: number): FuseTime => {
  const secs = Math.floor(ms / 1000);
  return { secs: BigInt(secs < 0 ? 0 : secs), nanos: Math.round((ms - secs * 1000) * 1e6) };
};

/** Mounts FUSE at `options.path` (fs-fuse.md §3.2 steps 2–3) and serves it with the handlers. */
export async function mountFuse(options: MountOptions): Promise<FuseMount> {
  const unavailable = fuseUnavailable();
  if (unavailable) throw new MountError(`mount: ${unavailable}`);
  const Fuse = loadFuse();
  const path = resolve(options.path);
  const { handlers, kind } = options;
  if (await isMountPoint(path)) throw new MountError(`${path} is already a mount`);
  try {
    await mkdir(dirname(path), { recursive: true });
    if (kind === "file") {
      if (!existsSync(path)) await (await open(path, fsConstants.O_CREAT | fsConstants.O_WRONLY, 0o600)).close();
    } else if (!existsSync(path)) await mkdir(path, { mode: 0o700 });
    const st = await stat(path);
    if (kind === "file" ? !st.isFile() : !st.isDirectory()) throw new Error(`${path} is not a ${kind === "file" ? "regular file" : "directory"}`);
  } catch (error) {
    throw new MountError(`mount: ${(error as Error).message}`);
  }

  const pending = new Set<Cb>();
  let closed = false;
  const mountedAt = toTime(Date.now());
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;

  /** Runs one ask; answers the kernel once, with EIO if the handler fails or the mount closes first. */
  const ask = <T>(cb: Cb, run: () => Promise<T>, answer: (value: T) => void) => {
    if (closed) return cb(EIO);
    let done = false;
    const once: Cb = (code, ...rest) => {
      if (done) return;
      done = true;
      pending.delete(once);
      cb(code, ...rest);
    };
    pending.add(once);
    run().then(
      (value) => {
        if (done) return;
        try {
          answer(value);
        } catch {
          once(EIO);
        }
        // answer() calls cb directly; make sure it counts as done.
        done = true;
        pending.delete(once);
      },
      () => once(EIO),
    );
  };
  const ackCode = (ack: FuseAckResult) => (ack.kind === "ok" ? 0 : ack.kind === "readOnly" ? EROFS : EIO);
  /** A fuse path (`/a/b`) as an ask path (`a/b`); a file mount always asks the empty path. */
  const rel = (p: string) => (kind === "file" ? "" : p.replace(/^\/+/, ""));
  const statOf = (s: FuseStat) => ({
    mode: (s.kind === "directory" ? 0o040000 : 0o100000) | (s.mode & 0o7777),
    uid: s.uid,
    gid: s.gid,
    size: s.kind === "directory" ? 0 : Number(s.size),
    nlink: s.kind === "directory" ? 2 : 1,
    atime: toDate(s.atime),
    mtime: toDate(s.mtime),
    ctime: toDate(s.ctime),
  });
  const rootDir = () => ({ mode: 0o040755, uid, gid, size: 0, nlink: 2, atime: toDate(mountedAt), mtime: toDate(mountedAt), ctime: toDate(mountedAt) });
  let fds = 0;

  const ops = {
    init: (cb: Cb) => cb(0),
    getattr: (p: string, cb: Cb) => {
      if (kind === "directory" && p === "/") return cb(0, rootDir());
      ask(cb, () => handlers.stat(rel(p)), (a) => {
        if (a.kind === "stat") {
          if (kind === "file" && a.stat.kind === "directory") return cb(EIO); // The provider's mistake.
          return cb(0, statOf(a.stat));
        }
        // A file mount holding nothing yet reads as an empty file; the first write creates it.
        if (a.kind === "missing") return kind === "file" ? cb(0, { ...rootDir(), mode: 0o100600, nlink: 1 }) : cb(ENOENT);
        return cb(EIO);
      });
    },
    fgetattr: (p: string, _fd: number, cb: Cb) => ops.getattr(p, cb),
    access: (_p: string, _mode: number, cb: Cb) => cb(0),
    statfs: (_p: string, cb: Cb) => cb(0, { bsize: 4096, frsize: 4096, blocks: 1 << 20, bfree: 1 << 19, bavail: 1 << 19, files: 1 << 20, ffree: 1 << 19, favail: 1 << 19, fsid: 0, flag: 0, namemax: 255 }),
    readdir: (p: string, cb: Cb) =>
      ask(cb, () => handlers.list(rel(p)), (a) => {
        if (a.kind === "entries") return cb(0, a.entries.map((e) => e.name));
        return cb(a.kind === "missing" ? ENOENT : EIO);
      }),
    opendir: (_p: string, _flags: number, cb: Cb) => cb(0, ++fds),
    releasedir: (_p: string, _fd: number, cb: Cb) => cb(0),
    open: (_p: string, _flags: number, cb: Cb) => cb(0, ++fds),
    release: (_p: string, _fd: number, cb: Cb) => cb(0),
    flush: (_p: string, _fd: number, cb: Cb) => cb(0),
    fsync: (_p: string, _datasync: boolean, _fd: number, cb: Cb) => cb(0),
    read: (p: string, _fd: number, buf: Buffer, len: number, pos: number, cb: Cb) =>
      ask(cb, () => handlers.read(rel(p), BigInt(pos), Math.min(len, FUSE_CHUNK_SIZE)), (a) => {
        if (a.kind === "data") {
          const n = Math.min(a.bytes.length, len);
          buf.set(a.bytes.subarray(0, n));
          return cb(n);
        }
        if (a.kind === "missing") return kind === "file" ? cb(0) : cb(ENOENT);
        return cb(EIO);
      }),
    write: (p: string, _fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => {
      // The kernel's buffer is reused once answered: the ask takes a copy.
      const bytes = Uint8Array.prototype.slice.call(buf, 0, len);
      ask(cb, () => handlers.write(rel(p), BigInt(pos), bytes), (a) => cb(a.kind === "ok" ? len : ackCode(a)));
    },
    // A create is a write of zero bytes at 0 (fs-fuse.md §4.3), then the program's mode (umask
    // applied by the kernel) as a setattr, so `cp`, `tar -x` and friends keep modes; the setattr is
    // best effort: a provider refusing it still has the file.
    create: (p: string, mode: number, cb: Cb) =>
      ask(cb, async () => {
        const made = await handlers.write(rel(p), 0n, new Uint8Array(0));
        if (made.kind === "ok") await handlers.setattr(rel(p), { mode: mode & 0o7777 }).catch(() => undefined);
        return made;
      }, (a) => (a.kind === "ok" ? cb(0, ++fds) : cb(ackCode(a)))),
    unlink: (p: string, cb: Cb) => ask(cb, () => handlers.remove(rel(p)), (a) => cb(ackCode(a))),
    rmdir: (p: string, cb: Cb) => ask(cb, () => handlers.remove(rel(p)), (a) => cb(ackCode(a))),
    rename: (from: string, to: string, cb: Cb) => ask(cb, () => handlers.rename(rel(from), rel(to)), (a) => cb(ackCode(a))),
    // The same for a directory's mode.
    mkdir: (p: string, mode: number, cb: Cb) =>
      ask(cb, async () => {
        const made = await handlers.mkdir(rel(p));
        if (made.kind === "ok") await handlers.setattr(rel(p), { mode: mode & 0o7777 }).catch(() => undefined);
        return made;
      }, (a) => cb(ackCode(a))),
    truncate: (p: string, size: number, cb: Cb) => ask(cb, () => handlers.truncate(rel(p), BigInt(size)), (a) => cb(ackCode(a))),
    ftruncate: (p: string, _fd: number, size: number, cb: Cb) => ops.truncate(p, size, cb),
    chmod: (p: string, mode: number, cb: Cb) => setattr(p, { mode: mode & 0o7777 }, cb),
    chown: (p: string, u: number, g: number, cb: Cb) => {
      const attrs: { uid?: number; gid?: number } = {};
      if (u !== 0xffffffff && u !== -1) attrs.uid = u;
      if (g !== 0xffffffff && g !== -1) attrs.gid = g;
      setattr(p, attrs, cb);
    },
    // Both times, in milliseconds (the binding's precision). libfuse 2.9.9's high-level API calls
    // utimens only when a program sets both (fuse-native sets no `utime_omit_ok`): a change of one
    // time alone (`touch -m -d …`) never reaches here and is not made.
    utimens: (p: string, atime: number, mtime: number, cb: Cb) => setattr(p, { atime: toTime(atime), mtime: toTime(mtime) }, cb),
    readlink: (_p: string, cb: Cb) => cb(ENOSYS),
    symlink: (_a: string, _b: string, cb: Cb) => cb(ENOSYS),
    link: (_a: string, _b: string, cb: Cb) => cb(ENOSYS),
    mknod: (_p: string, _mode: number, _dev: number, cb: Cb) => cb(ENOSYS),
  };
  function setattr(p: string, attrs: FuseAttrs, cb: Cb) {
    ask(cb, () => handlers.setattr(rel(p), attrs), (a) => cb(ackCode(a)));
  }

  const fuse = new Fuse(path, ops, {
    timeout: false, // No timeouts: the kernel's own are the only clock (fs-fuse.md §2).
    fsname: "diverge-fuse",
    defaultPermissions: true,
    allowOther: uid === 0,
  });
  // noatime and direct_io are passed as options fuse-native knows no flag for.
  const withOptions = fuse as unknown as { _fuseOptions(): string };
  const base = withOptions._fuseOptions.bind(fuse);
  withOptions._fuseOptions = () => {
    const opts = base();
    const extra = ["noatime", "direct_io", "attr_timeout=0", "entry_timeout=0", "negative_timeout=0"];
    // auto_unmount: libfuse 2.9 mounts through fusermount, which stays beside the proxy and unmounts
    // when the proxy's FUSE descriptor closes, however the proxy ends (SIGKILL included, where no
    // exit handler runs). Only where fusermount is found: without it libfuse could not mount at all.
    if (fusermountFound()) extra.unshift("auto_unmount");
    return opts ? `${opts},${extra.join(",")}` : `-o${extra.join(",")}`;
  };
  await new Promise<void>((resolvePromise, reject) =>
    fuse.mount((error) => (error ? reject(new MountError(`mount: ${error.message}`)) : resolvePromise())),
  );

  // A process that exits without closing still leaves no mount behind (a lazy unmount; the kernel
  // answers what the program still asks with ENOTCONN until it lets go).
  const onExit = () => {
    for (const [command, args] of [["fusermount3", ["-u", "-z", path]], ["fusermount", ["-u", "-z", path]], ["umount", ["-l", path]]] as const) {
      try {
        execFileSync(command, [...args], { stdio: "ignore" });
        return;
      } catch {
        // the next way
      }
    }
  };
  process.once("exit", onExit);

  let closing: Promise<void> | undefined;
  return {
    path,
    close() {
      closing ??= (async () => {
        process.removeListener("exit", onExit);
        closed = true;
        for (const cb of [...pending]) cb(EIO);
        // fuse-native's unmount (fusermount -uz, then releasing its thread), then any mount it left.
        await new Promise<void>((r) => fuse.unmount(() => r()));
        await unmount(path);
      })();
      return closing;
    },
  };
}

let fusermount: boolean | undefined;
/** Whether libfuse 2.9's helper `fusermount` is on the PATH (or in /bin, /usr/bin). */
function fusermountFound(): boolean {
  fusermount ??= [...(process.env.PATH ?? "").split(":"), "/bin", "/usr/bin"].some((dir) => dir !== "" && existsSync(`${dir}/fusermount`));
  return fusermount;
}

/** Whether something is mounted exactly at `path` (from /proc/self/mountinfo). */
export async function isMountPoint(path: string): Promise<boolean> {
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const target = resolve(path);
  return info.split("\n").some((line) => unescapeMount(line.split(" ")[4] ?? "") === target);
}

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Lazily unmounts (the mount goes away once nothing uses it); no error when nothing is mounted. */
async function unmount(path: string): Promise<void> {
  if (!(await isMountPoint(path))) return;
  for (const [command, args] of [
    ["fusermount3", ["-u", "-z", path]],
    ["fusermount", ["-u", "-z", path]],
    ["umount", ["-l", path]],
  ] as const) {
    const ok = await new Promise<boolean>((r) => execFile(command, [...args], (error) => r(!error)));
    if (ok) return;
  }
  throw new MountError(`mount: could not unmount ${path}`);
}

