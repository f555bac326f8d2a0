// How many asks a program's large reads and writes and a directory's listing cost on a real kernel
// FUSE mount (issue 36): with libfuse 3 a program's 1 MiB write(2) is one write ask and a sequential
// read is asked 1 MiB at a time (libfuse 2.9: 128 KiB pieces, 8 asks per MiB); a directory's read
// gives each entry's type, so a program that only asks whether an entry is a directory (d_type,
// `os.scandir`) makes no stat ask for it. Programs run in child processes (this process serves).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { directoryHandlers, fuseUnavailable, mountFuse, type FuseHandlers, type FuseMount } from "../src/families/fuse/index.js";
import { fuseLibraryVersion } from "../src/families/fuse/mount.js";

// libfuse 3 asked for: the default where it loads; here its absence skips rather than falls back (the binding is loaded at the first mount, after this).
process.env.DIVERGE_FUSE_LIBFUSE = "3";

const unavailable = fuseUnavailable() ?? (fuseLibraryVersion() === 3 ? undefined : "the FUSE binding loaded is libfuse 2.9's (libfuse3-dev missing at build time)");
if (unavailable) console.log(`FUSE transfer tests skipped: ${unavailable}`);

let base: string;
let provider: string;
let mounted: FuseMount | undefined;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-transfers-")));
  provider = join(base, "provider");
  await mkdir(provider);
});

afterEach(async () => {
  await mounted?.close();
  mounted = undefined;
  await rm(base, { recursive: true, force: true });
});

/** The provider's directory, each ask's kind and size noted. */
function counted(dir: string) {
  const asks: string[] = [];
  const inner = directoryHandlers(dir);
  const handlers: FuseHandlers = {
    ...inner,
    read: (p, offset, length) => (asks.push(`read ${length}`), inner.read(p, offset, length)),
    write: (p, offset, bytes) => (asks.push(`write ${bytes.length}`), inner.write(p, offset, bytes)),
    stat: (p) => (asks.push(`stat ${p}`), inner.stat(p)),
  };
  return { asks, handlers };
}

function sh(command: string): Promise<string> {
  return new Promise((resolve, reject) => execFile("sh", ["-c", command], { timeout: 120_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${command}: ${stderr || error.message}`)) : resolve(stdout))));
}

describe.skipIf(!!unavailable)("FUSE transfers (libfuse 3)", () => {
  it("a 1 MiB write(2) is one write ask, and a sequential read after the page cache is dropped asks 1 MiB at a time", async () => {
    const at = join(base, "mnt");
    const { asks, handlers } = counted(provider);
    mounted = await mountFuse({ path: at, kind: "directory", handlers });
    await sh(`dd if=/dev/urandom of=${at}/big bs=1M count=4 conv=fsync status=none`);
    const writes = asks.filter((a) => a.startsWith("write ") && a !== "write 0");
    expect(writes).toEqual(["write 1048576", "write 1048576", "write 1048576", "write 1048576"]);
    asks.length = 0;
    await sh(`sync; echo 3 > /proc/sys/vm/drop_caches; dd if=${at}/big of=/dev/null bs=1M status=none`);
    const reads = asks.filter((a) => a.startsWith("read "));
    // Every piece of the 4 MiB is asked whole (the read at the end of the file may ask past it).
    expect(reads.length).toBeGreaterThanOrEqual(4);
    expect(reads.slice(0, 4)).toEqual(["read 1048576", "read 1048576", "read 1048576", "read 1048576"]);
    expect(await sh(`cmp ${at}/big ${provider}/big && echo same`)).toBe("same\n");
  });

  it("a directory's read gives each entry's type: os.scandir's is_dir asks no stat of the entries", async () => {
    await mkdir(join(provider, "sub"));
    for (let i = 0; i < 20; i++) await writeFile(join(provider, `f${i}`), "x");
    const at = join(base, "mnt");
    const { asks, handlers } = counted(provider);
    mounted = await mountFuse({ path: at, kind: "directory", handlers });
    const out = await sh(`python3 -c "import os, json; print(json.dumps(sorted([e.name for e in os.scandir('${at}') if e.is_dir(follow_symlinks=False)])))"`);
    expect(JSON.parse(out)).toEqual(["sub"]);
    expect(asks.filter((a) => a.startsWith("stat "))).toEqual([]);
  });
});
