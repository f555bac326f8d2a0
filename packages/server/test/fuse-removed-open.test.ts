// Operations on an open directory whose path is gone (issue 36: the proxy's SIGSEGV on the main
// thread under the FUSE bench with libfuse 3). libfuse 3 calls fsyncdir and releasedir of a
// directory removed while open with no path (NULL); the binding handed JavaScript an uninitialised
// value for it, and the handler touching it crashed the process (`rm -r` and git's temporary
// directories do this: the kernel's release comes after the rmdir). libfuse 2.9 names such a
// path "-", and the mount then kept the directory's unread listing under its old path: a directory
// made again there listed as it was before. Programs run in child processes (this process serves).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { directoryHandlers, fuseUnavailable, mountFuse, type FuseMount } from "../src/families/fuse/index.js";

const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE removed-while-open tests skipped: ${unavailable}`);
const fuseNative = createRequire(import.meta.url).resolve("@diverge/fuse-native");

let base: string;
let mounted: FuseMount | undefined;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-removed-")));
});

afterEach(async () => {
  await mounted?.close();
  mounted = undefined;
  await rm(base, { recursive: true, force: true });
});

function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(file, args, { timeout: 120_000, env }, (_error, stdout, stderr) => resolve({ code: child.exitCode, signal: child.signalCode, stdout, stderr }));
  });
}

/** Each directory made, opened, removed, then fsync'd and closed while still open. */
const REMOVE_WHILE_OPEN = `
import os, sys
for i in range(int(sys.argv[2])):
    d = os.path.join(sys.argv[1], "d%d" % i)
    os.mkdir(d)
    fd = os.open(d, os.O_RDONLY)
    os.rmdir(d)
    try:
        os.fsync(fd)
    except OSError:
        pass
    os.close(fd)
print("done")
`;

/**
 * The binding alone, in a child process: serves a mount whose handlers note every path they are
 * handed that is not a path, runs the program above on it, and prints what was noted.
 */
const SERVE_RAW = `
const Fuse = require(process.argv[1]);
const { execFile } = require("child_process");
const [at, program] = process.argv.slice(2);
const dirs = new Map([["/", 0o40755]]);
const stat = (mode) => ({ mode, size: 4096, uid: 0, gid: 0, mtime: new Date(), atime: new Date(), ctime: new Date(), nlink: 2 });
const handed = [];
const note = (op, p) => { if (typeof p !== "string") handed.push(op + ":" + (p === null ? "null" : typeof p)); };
const fuse = new Fuse(at, {
  getattr: (p, cb) => { note("getattr", p); dirs.has(p) ? cb(0, stat(dirs.get(p))) : cb(Fuse.ENOENT); },
  opendir: (p, flags, cb) => { note("opendir", p); cb(0, 7); },
  readdir: (p, cb) => { note("readdir", p); cb(0, [".", ".."]); },
  fsyncdir: (p, datasync, fd, cb) => { note("fsyncdir", p); cb(0); },
  releasedir: (p, fd, cb) => { note("releasedir", p); cb(0); },
  mkdir: (p, mode, cb) => { dirs.set(p, 0o40000 | mode); cb(0); },
  rmdir: (p, cb) => { dirs.delete(p); cb(0); },
}, {});
fuse.mount((error) => {
  if (error) throw error;
  execFile("python3", ["-c", program, at, "20"], (error, stdout, stderr) => {
    fuse.unmount(() => {
      console.log(JSON.stringify({ program: error ? stderr : stdout.trim(), libfuse: Fuse.LIBFUSE_MAJOR, handed }));
      process.exit(0);
    });
  });
});
`;

describe.skipIf(!!unavailable)("FUSE: a directory removed while open", () => {
  it("libfuse 3's binding hands its fsyncdir and releasedir a null path, and the process lives", async () => {
    const at = join(base, "raw");
    await mkdir(at);
    const served = await run(process.execPath, ["-e", SERVE_RAW, fuseNative, at, REMOVE_WHILE_OPEN], { ...process.env, DIVERGE_FUSE_LIBFUSE: "3" });
    if (served.stderr.includes("the libfuse 3 binding does not load")) return console.log("skipped: no libfuse 3 binding here");
    expect({ code: served.code, signal: served.signal, stderr: served.code === 0 ? "" : served.stderr.slice(0, 2000) }).toEqual({ code: 0, signal: null, stderr: "" });
    const report = JSON.parse(served.stdout) as { program: string; libfuse: number; handed: string[] };
    expect(report.program).toBe("done");
    expect(report.libfuse).toBe(3);
    // Every directory's release came with no path, as null (never anything else).
    expect(report.handed.filter((h) => h.startsWith("releasedir:"))).toEqual(Array(20).fill("releasedir:null"));
    expect(report.handed.filter((h) => !h.endsWith(":null"))).toEqual([]);
  });

  it("the proxy's mount serves on, and a directory made again at that path lists what it holds now", async () => {
    const provider = join(base, "provider");
    await mkdir(provider);
    const at = join(base, "mnt");
    mounted = await mountFuse({ path: at, kind: "directory", handlers: directoryHandlers(provider) });
    const removed = await run("python3", ["-c", REMOVE_WHILE_OPEN, at, "20"]);
    expect(removed.stdout.trim()).toBe("done");
    // Opened, removed while open (its listing, asked at the open, never read), then made again with a file.
    const again = await run("python3", ["-c", `import os, sys\nd = os.path.join(sys.argv[1], "d")\nos.mkdir(d)\nfd = os.open(d, os.O_RDONLY)\nos.rmdir(d)\nos.close(fd)\nos.mkdir(d)\nopen(os.path.join(d, "x"), "w").close()\nprint(sorted(os.listdir(d)))`, at]);
    expect(again.stdout.trim()).toBe("['x']");
    const listed = await run("ls", ["-A", at]);
    expect(listed.stdout).toBe("d\n");
  });
});
