// Each `--fuse-cache` level's guarantee (issue 25), as the server README's consistency model states
// it, on a real kernel mount over both transports. The provider's directory is changed directly (as a
// provider whose files change under the mount would), by the program's own child process between its
// reads, and what the program then sees is asserted:
//   none           a change is seen at once, by a stat and by an open (multiplexed: by the same open
//                  too, direct I/O; paths: the opens of a file share the proxy's copy taken at the
//                  first, so once the last has closed); no shared mmap (ENODEV); a new and a
//                  removed file at once.
//   close-to-open  a change is seen by the next open once the attributes' 1 s has passed, by a
//                  stat then too; a new file at once (no negative cache); shared mmap works.
//   full           pages are kept across opens: a change the provider makes to a file already read
//                  is not seen by the next open; a change made through the mount is; shared mmap works.
// The one wait (1.2 s) is the guarantee's own bound: past it the kernel must ask again.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { setDefaultFuseCache, type FuseCacheLevel } from "@diverge/server";
import { mountProvider, provider, sh, unavailable, useFuseHarness, type Transport } from "./fuse-harness.js";

useFuseHarness();
afterEach(() => setDefaultFuseCache(undefined));

/** Runs a Python script in a child process (the program); returns what it prints as JSON. */
async function python(script: string): Promise<any> {
  const { writeFile: write } = await import("node:fs/promises");
  const file = join(provider, "..", `probe-${process.pid}-${Math.random().toString(36).slice(2)}.py`);
  await write(file, `import os, sys, json, mmap, time, errno\n${script}\n`);
  const run = await sh(`timeout -s KILL 60 python3 ${file}`);
  if (run.code !== 0) throw new Error(`python failed (${run.code}): ${run.stderr}`);
  return JSON.parse(run.stdout);
}

/** Python: the errno name of a shared, writable mmap of `path`, or "ok". */
const MMAP = `
def shared_mmap(path):
    fd = os.open(path, os.O_RDWR)
    try:
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m.close()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
    finally:
        os.close(fd)
def read(path):
    with open(path, "rb") as f:
        return f.read().decode()
def stat_size(path):
    try:
        return os.stat(path).st_size
    except OSError as e:
        return errno.errorcode[e.errno]
`;

async function mountAt(transport: Transport, level: FuseCacheLevel): Promise<string> {
  setDefaultFuseCache(level);
  await writeFile(join(provider, "f"), "one");
  await writeFile(join(provider, "gone-soon"), "x");
  return mountProvider(transport);
}

describe.skipIf(!!unavailable)("FUSE cache levels: each level's guarantee", () => {
  for (const transport of ["multiplexed", "paths"] as const) {
    describe(transport, () => {
      it("none: a change the provider makes is seen at once by a stat and an open (on paths once no open of the file is left); no shared mmap", async () => {
        const at = await mountAt(transport, "none");
        const seen = await python(`${MMAP}
m, p = ${JSON.stringify(at)}, ${JSON.stringify(provider)}
fd = os.open(m + "/f", os.O_RDONLY)
before = os.pread(fd, 100, 0).decode()
missing = stat_size(m + "/new")
stat_size(m + "/gone-soon")
with open(p + "/f", "w") as f: f.write("two, longer")
with open(p + "/new", "w") as f: f.write("new")
os.unlink(p + "/gone-soon")
stat_open, reopened_open, same_open = stat_size(m + "/f"), read(m + "/f"), os.pread(fd, 100, 0).decode()
os.close(fd)
print(json.dumps({
  "before": before,
  "statWhileOpen": stat_open,
  "reopenedWhileOpen": reopened_open,
  "sameOpen": same_open,
  "stat": stat_size(m + "/f"),
  "reopened": read(m + "/f"),
  "missingBefore": missing,
  "newFile": stat_size(m + "/new"),
  "removed": stat_size(m + "/gone-soon"),
  "mmap": shared_mmap(m + "/f"),
}))
`);
        // Multiplexed: direct I/O, every read and stat asked. Paths: the opens of a file share the
        // proxy's copy, taken at the first of them, until the last closes; then the next open and stat see the change.
        const whileOpen = transport === "multiplexed" ? "two, longer" : "one";
        expect(seen).toEqual({
          before: "one",
          statWhileOpen: whileOpen.length,
          reopenedWhileOpen: whileOpen,
          sameOpen: whileOpen,
          stat: "two, longer".length,
          reopened: "two, longer",
          missingBefore: "ENOENT",
          newFile: 3,
          removed: "ENOENT",
          mmap: "ENODEV",
        });
      });

      it("close-to-open: a change is seen by the next open once the attributes' 1 s has passed, and by a stat; a new file at once; shared mmap works", async () => {
        const at = await mountAt(transport, "close-to-open");
        const seen = await python(`${MMAP}
m, p = ${JSON.stringify(at)}, ${JSON.stringify(provider)}
before = read(m + "/f")
missing = stat_size(m + "/new")
with open(p + "/f", "w") as f: f.write("two, longer")
with open(p + "/new", "w") as f: f.write("new")
new_file = stat_size(m + "/new")
time.sleep(1.2)
print(json.dumps({
  "before": before,
  "missingBefore": missing,
  "newFile": new_file,
  "stat": stat_size(m + "/f"),
  "reopened": read(m + "/f"),
  "mmap": shared_mmap(m + "/f"),
}))
`);
        expect(seen).toEqual({ before: "one", missingBefore: "ENOENT", newFile: 3, stat: "two, longer".length, reopened: "two, longer", mmap: "ok" });
      });

      it("full: pages are kept across opens (a provider's change to a file read is not seen by the next open); a change through the mount is; shared mmap works", async () => {
        const at = await mountAt(transport, "full");
        const seen = await python(`${MMAP}
m, p = ${JSON.stringify(at)}, ${JSON.stringify(provider)}
before = read(m + "/f")
# The same size: the size cached with the attributes (60 s) cannot tell.
with open(p + "/f", "w") as f: f.write("two")
kept = read(m + "/f")
with open(m + "/f", "w") as f: f.write("three")
through = read(m + "/f")
print(json.dumps({ "before": before, "kept": kept, "through": through, "provider": open(p + "/f").read(), "mmap": shared_mmap(m + "/f") }))
`);
        expect(seen).toEqual({ before: "one", kept: "one", through: "three", provider: "three", mmap: "ok" });
      });
    });
  }
});
