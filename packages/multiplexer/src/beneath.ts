// Paths resolved beneath a root without a window between check and use (Linux; Node only).
//
// Why: checking a path by name and then using it by name lets a program that swaps one of its
// directories for a symlink in between (renameat2 RENAME_EXCHANGE in a loop) redirect the use to
// anything on the machine. Here a path is walked one component at a time from a descriptor of the
// root, each step opened with O_NOFOLLOW relative to the descriptor held for the previous one
// (through `/proc/self/fd/<fd>/<name>`, which the kernel resolves from the descriptor's own
// directory, whatever its name is now). What is finally used is a held directory plus one name in
// it, and every operation on that name is one that does not follow a link there (O_NOFOLLOW,
// lstat, lchown, lutimes, or the held descriptor of the object itself). A swap at any moment can
// therefore make an operation fail, never act outside the root.
//
// Links met on the way are refused (`follow: false`: the link is served as a link, never entered),
// or followed only as far as they stay beneath the root (`follow: true`): a relative target is
// walked from the link's own held directory, `..` pops the chain of held directories (never opens
// `..`, so it cannot climb out of a directory moved away meanwhile), and an absolute target must
// name the root's real path or something under it.
import { constants } from "node:fs";
import * as fs from "node:fs";

/** Linux's O_PATH: a descriptor naming an object without opening it for I/O (Node does not export it). */
export const O_PATH = 0o10000000;
const { O_NOFOLLOW, O_DIRECTORY } = constants;
/** The kernel's own limit on links followed in one resolution. */
const MAX_LINKS = 40;

/**
 * `call` made synchronously, its result or failure handed back as a promise: the walk's calls
 * (callers are unchanged), and the directory backend's metadata calls.
 * Each is a metadata call of a few µs (an O_PATH open, a close, an fstat, a readlink). Through the
 * thread pool each cost ~60 µs of CPU in promises and hand-offs, so one FUSE stat of a path four deep
 * cost 700 µs where the lstat itself cost 35 (issue 36). No call here waits on a device or a peer:
 * O_PATH opens no file, and `openAt` adds O_NONBLOCK, so a FIFO cannot hold the loop.
 */
export const atOnce =
  <A extends unknown[], R>(call: (...args: A) => R) =>
  (...args: A): Promise<R> => {
    try {
      return Promise.resolve(call(...args));
    } catch (error) {
      return Promise.reject(error);
    }
  };
const openFd = atOnce((path: string, flags: number, mode?: number) => fs.openSync(path, flags, mode));
const closeFd = atOnce((fd: number) => fs.closeSync(fd));
const fstat = atOnce((fd: number) => fs.fstatSync(fd));
const readlink = atOnce((path: string) => fs.readlinkSync(path));
const realpath = atOnce((path: string) => fs.realpathSync.native(path));

/** The path through which the kernel names what descriptor `fd` holds, or `name` inside it. */
export const fdPath = (fd: number, name?: string): string => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`);

/** A failure to resolve a path beneath the root, with the errno code a caller maps to its own error. */
export class BeneathError extends Error {
  constructor(
    /** `EOUTSIDE` when a link leads outside the root; else the errno code (ENOENT, ENOTDIR, ELOOP, …). */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "BeneathError";
  }
}

export interface ResolveOptions {
  /** Follow links met on the way as far as they stay beneath the root (default: refuse them with ELOOP). */
  readonly follow?: boolean;
}

/** A directory held by descriptor and one name in it: what an operation acts on. */
export interface Place {
  /** The held directory's descriptor (O_PATH). */
  readonly dir: number;
  /** The last component, never `.`/`..`/empty; may name nothing yet. */
  readonly name: string;
  /** `/proc/self/fd/<dir>/<name>`: use only with calls that do not follow a link at the last step. */
  readonly path: string;
  /** Closes the held directory. */
  release(): Promise<void>;
}

/** Whether `part` is one path component that names an entry: not empty, `.` or `..`, and without `/` or NUL. */
export const isName = (part: string) => part !== "" && part !== "." && part !== ".." && !part.includes("/") && !part.includes("\0");
const code = (error: unknown) => (error as NodeJS.ErrnoException).code ?? "EIO";

/**
 * A root directory, held open for the life of the object. Every method takes a path as components
 * relative to the root (as the wire carries them); an empty array is the root itself.
 */
export class Beneath {
  private constructor(
    /** The root's real path when it was opened. */
    readonly real: string,
    /** The descriptor (O_PATH) of the root. */
    readonly fd: number,
  ) {}

  /** Opens `root` (following links in `root` itself: it is the caller's choice, not the program's). */
  static async open(root: string): Promise<Beneath> {
    const real = await realpath(root);
    const fd = await openFd(real, O_PATH | O_DIRECTORY);
    return new Beneath(real, fd);
  }

  /** Closes the root's descriptor. */
  close(): Promise<void> {
    return closeFd(this.fd);
  }

  /**
   * The directory holding the last component, and its name. The last component itself is not
   * resolved: with `follow`, call `resolve` instead when the operation should act on a link's target.
   */
  async parent(components: readonly string[], options: ResolveOptions = {}): Promise<Place> {
    if (components.length === 0) throw new BeneathError("EINVAL", "the root has no parent");
    checkComponents(components);
    const chain = await this.walk(components.slice(0, -1), options.follow ?? false, { links: 0 });
    const dir = chain.pop()!;
    await closeAll(chain);
    return place(dir, components[components.length - 1]!);
  }

  /**
   * Like `parent`, but with `follow` a link in the last component is followed too, so the place
   * names a non-link (or nothing) at the time of resolution. For the root itself (no components)
   * the place is the root's parent directory as seen from the root: `name` is `.`.
   */
  async resolve(components: readonly string[], options: ResolveOptions = {}): Promise<Place> {
    checkComponents(components);
    const follow = options.follow ?? false;
    const budget = { links: 0 };
    let chain = await this.walk(components.slice(0, -1), follow, budget);
    if (components.length === 0) return place(chain.pop()!, ".");
    let name = components[components.length - 1]!;
    while (follow) {
      const dir = chain[chain.length - 1]!;
      let target: string;
      try {
        target = await readlink(fdPath(dir, name));
      } catch (error) {
        if (code(error) === "EINVAL" || code(error) === "ENOENT") break; // not a link, or nothing there
        await closeAll(chain);
        throw new BeneathError(code(error), `cannot read ${name}`);
      }
      if (++budget.links > MAX_LINKS) {
        await closeAll(chain);
        throw new BeneathError("ELOOP", "too many levels of symbolic links");
      }
      const parts = await this.linkParts(target, chain);
      const last = parts[parts.length - 1];
      if (last === undefined || last === "." || last === "..") {
        // The link names a directory (the root, `.`, `..`): the place is that directory itself.
        chain = await this.walkFrom(chain, parts, follow, budget);
        const dir = chain.pop()!;
        await closeAll(chain);
        return place(dir, ".");
      }
      chain = await this.walkFrom(chain, parts.slice(0, -1), follow, budget);
      name = last;
    }
    const dir = chain.pop()!;
    await closeAll(chain);
    return place(dir, name);
  }

  /** A held descriptor (O_PATH) of the directory the components name; the caller closes it. */
  async directory(components: readonly string[], options: ResolveOptions = {}): Promise<number> {
    checkComponents(components);
    const chain = await this.walk(components, options.follow ?? false, { links: 0 });
    const dir = chain.pop()!;
    await closeAll(chain);
    return dir;
  }

  /** Runs `use` on the place the components name, releasing it afterwards. */
  async at<T>(components: readonly string[], use: (place: Place) => Promise<T>, options: ResolveOptions & { readonly last?: "resolve" | "keep" } = {}): Promise<T> {
    const where = options.last === "keep" && components.length > 0 ? await this.parent(components, options) : await this.resolve(components, options);
    try {
      return await use(where);
    } finally {
      await where.release();
    }
  }

  /** Walks `components` as directories from the root; returns the chain of held descriptors, root's duplicate first. */
  private async walk(components: readonly string[], follow: boolean, budget: { links: number }): Promise<number[]> {
    return this.walkFrom([await openFd(fdPath(this.fd), O_PATH | O_DIRECTORY)], components, follow, budget);
  }

  private async walkFrom(chain: number[], components: readonly string[], follow: boolean, budget: { links: number }): Promise<number[]> {
    const pending = [...components];
    try {
      while (pending.length > 0) {
        const part = pending.shift()!;
        if (part === ".") continue;
        if (part === "..") {
          if (chain.length === 1) throw new BeneathError("EOUTSIDE", "the path leads outside the root");
          await closeFd(chain.pop()!);
          continue;
        }
        const dir = chain[chain.length - 1]!;
        let next: number;
        try {
          next = await openFd(fdPath(dir, part), O_PATH | O_NOFOLLOW);
        } catch (error) {
          throw new BeneathError(code(error), `cannot open ${part}`);
        }
        const stat = await fstat(next).catch(async (error) => {
          await closeFd(next);
          throw new BeneathError(code(error), `cannot stat ${part}`);
        });
        if (stat.isDirectory()) {
          chain.push(next);
          continue;
        }
        await closeFd(next);
        if (!stat.isSymbolicLink()) throw new BeneathError("ENOTDIR", `${part} is not a directory`);
        if (!follow) throw new BeneathError("ELOOP", `${part} is a symbolic link`);
        if (++budget.links > MAX_LINKS) throw new BeneathError("ELOOP", "too many levels of symbolic links");
        let target: string;
        try {
          target = await readlink(fdPath(dir, part));
        } catch (error) {
          throw new BeneathError(code(error), `cannot read ${part}`);
        }
        pending.unshift(...(await this.linkParts(target, chain)));
      }
      return chain;
    } catch (error) {
      await closeAll(chain);
      throw error;
    }
  }

  /**
   * A link's target as components to walk from the link's directory: a relative target as it is;
   * an absolute one must lie under the root's real path, and the chain is cut back to the root.
   */
  private async linkParts(target: string, chain: number[]): Promise<string[]> {
    if (!target.startsWith("/")) return target.split("/").filter((part) => part !== "");
    const rootPrefix = this.real === "/" ? "/" : this.real + "/";
    if (target !== this.real && !target.startsWith(rootPrefix)) {
      await closeAll(chain);
      throw new BeneathError("EOUTSIDE", "the path leads outside the root");
    }
    while (chain.length > 1) await closeFd(chain.pop()!);
    return target.slice(this.real.length).split("/").filter((part) => part !== "");
  }
}

/**
 * The place an absolute path names, resolved by the OS with every link followed: for a path the
 * caller chose (a provider's own directory or file), never for one a program controls.
 */
export async function placeOf(path: string): Promise<Place> {
  const real = await realpath(path);
  if (real === "/") return place(await openFd("/", O_PATH | O_DIRECTORY), ".");
  const slash = real.lastIndexOf("/");
  return place(await openFd(real.slice(0, slash) || "/", O_PATH | O_DIRECTORY), real.slice(slash + 1));
}

function checkComponents(components: readonly string[]): void {
  for (const part of components) if (!isName(part)) throw new BeneathError("EINVAL", "not a path component");
}

function place(dir: number, name: string): Place {
  let released = false;
  return {
    dir,
    name,
    path: fdPath(dir, name),
    release: async () => {
      if (released) return;
      released = true;
      await closeFd(dir);
    },
  };
}

async function closeAll(fds: number[]): Promise<void> {
  await Promise.all(fds.splice(0).map((fd) => closeFd(fd).catch(() => undefined)));
}

// Operations on a place that never follow a link in its last component.

/** Opens the place's object with `flags | O_NOFOLLOW` (a link there fails with ELOOP). */
export const openAt = (at: Place, flags: number, mode?: number): Promise<number> => openFd(at.path, flags | O_NOFOLLOW | constants.O_NONBLOCK, mode);

/** Runs `use` with a descriptor (O_PATH) of the place's object, refusing a link there. */
export async function withObject<T>(at: Place, use: (fd: number, stat: fs.Stats) => Promise<T>): Promise<T> {
  const fd = await openFd(at.path, O_PATH | O_NOFOLLOW);
  try {
    const stat = await fstat(fd);
    if (stat.isSymbolicLink()) throw Object.assign(new Error("a symbolic link is there"), { code: "ELOOP" });
    return await use(fd, stat);
  } finally {
    await closeFd(fd);
  }
}

/** chmod of the place's object itself (never a link's target): through its own O_PATH descriptor. */
export const chmodAt = (at: Place, mode: number): Promise<void> => withObject(at, (fd) => fs.promises.chmod(fdPath(fd), mode));

/** Entries of the directory at the place (a link there fails with ELOOP). */
export async function readdirAt(at: Place): Promise<fs.Dirent[]> {
  const fd = await openFd(at.path, O_PATH | O_DIRECTORY | O_NOFOLLOW);
  try {
    return await fs.promises.readdir(fdPath(fd), { withFileTypes: true });
  } finally {
    await closeFd(fd);
  }
}
