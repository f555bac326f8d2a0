// What programs trust of a FUSE mount, on a real kernel mount served through a real proxy, on both
// transports (issue 25): a POSIX probe (fuse-probe.py: st_blocks, `.`/`..`, directory link counts,
// times to the nanosecond, the errnos programs expect, shared mmap, mtime after a write, links and
// FIFOs refused clearly); the errno a provider names in its message; the paths transport's
// whole-file model (one read per open, one write-back per close, EFBIG at open past one message).
// Real programs (git, sqlite3, make, tar, rsync, cp, du): fuse-programs.test.ts. The programs run as child processes: this process serves
// the mount.
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { directoryHandlers } from "../src/index.js";

import { PROBE, base, counted, logged, mountProvider, ok, provider, sh, unavailable, useFuseHarness } from "./fuse-harness.js";

useFuseHarness();

describe.skipIf(!!unavailable)("a FUSE mount programs can trust", () => {
  for (const transport of ["multiplexed", "paths"] as const) {
    it(`${transport}: the POSIX probe passes every check`, { timeout: 120_000 }, async () => {
      const mount = await mountProvider(transport);
      const results = JSON.parse(await ok(`python3 ${PROBE} ${mount} ${transport}`)) as Record<string, string>;
      const failed = Object.fromEntries(Object.entries(results).filter(([, v]) => v !== "ok"));
      expect(failed).toEqual({});
      expect(Object.keys(results).length).toBeGreaterThanOrEqual(20);
      // What the program wrote is in the provider's directory, exactly.
      expect((await stat(join(provider, "big"))).size).toBe(12 << 20);
      expect(await readFile(join(provider, "holes"))).toEqual(Buffer.from("a\0\0\0\0z"));
      if (transport === "multiplexed") expect((await stat(join(provider, "times"), { bigint: true })).mtimeNs).toBe(1_500_000_000_987_654_321n);
    });

    it(`${transport}: an errno named at the start of the provider's message reaches the program; any other message is EIO`, { timeout: 120_000 }, async () => {
      await writeFile(join(provider, "guarded"), "g");
      await writeFile(join(provider, "odd"), "o");
      const dir = directoryHandlers(provider);
      const mount = await mountProvider(transport, {
        ...dir,
        remove: async (path) => (path === "guarded" ? { kind: "error", message: "EACCES: the provider keeps this one" } : path === "odd" ? { kind: "error", message: "no such luck" } : dir.remove(path)),
      });
      const guarded = await sh(`rm -f ${join(mount, "guarded")}`);
      expect(guarded.stderr).toContain("Permission denied");
      const odd = await sh(`rm -f ${join(mount, "odd")}`);
      expect(odd.stderr).toContain("Input/output error");
    });
  }

  it("paths: a file is read once per open and written back once per close, whatever the I/O sizes", { timeout: 120_000 }, async () => {
    const mount = await mountProvider("paths");
    await writeFile(join(provider, "in.bin"), Buffer.alloc(6 << 20, 7));
    counted.fuseRead = counted.fuseWrite = 0;
    await ok(`dd if=${join(mount, "in.bin")} of=/dev/null bs=4k status=none`);
    expect(counted.fuseRead).toBe(1);
    counted.fuseWrite = 0;
    await ok(`dd if=/dev/zero of=${join(mount, "in.bin")} bs=64k count=96 conv=notrunc status=none`);
    expect(counted.fuseWrite).toBe(1);
    expect((await stat(join(provider, "in.bin"))).size).toBe(6 << 20);
    expect((await readFile(join(provider, "in.bin"))).every((b) => b === 0)).toBe(true);
  });

  it("paths: a file past what one message carries fails at open with EFBIG and a log line; a write past it never leaves a cut file", { timeout: 120_000 }, async () => {
    await writeFile(join(provider, "large.bin"), Buffer.alloc(2 << 20, 1));
    const mount = await mountProvider("paths", provider, 1 << 20);
    const read = await sh(`cat ${join(mount, "large.bin")} > /dev/null`);
    expect(read.stderr).toContain("File too large");
    expect(logged.some((line) => line.includes("large.bin") && line.includes("EFBIG"))).toBe(true);
    const written = await sh(`head -c 3000000 /dev/zero > ${join(mount, "new.bin")}`);
    expect(written.code).not.toBe(0);
    expect(written.stderr).toContain("File too large");
    expect((await stat(join(provider, "new.bin"))).size).toBe(0);
  });

  for (const transport of ["multiplexed", "paths"] as const) {
    it(`${transport}: tar x, cp -a and rsync -a of a tree with links fail clearly`, { timeout: 120_000 }, async () => {
      const mount = await mountProvider(transport);
      const source = join(base, "linked");
      await ok(`mkdir -p ${source} && echo x > ${source}/file && ln -s file ${source}/sym && ln ${source}/file ${source}/hard`);
      const tar = await sh(`tar -C ${source} -cf - . | tar -C ${mount} -xf -`);
      expect(tar.code).not.toBe(0);
      expect(tar.stderr).toMatch(/sym: Cannot create symlink to .file.: Function not implemented/);
      const cp = await sh(`cp -a ${source} ${join(mount, "cp")}`);
      expect(cp.code).not.toBe(0);
      expect(cp.stderr).toMatch(/Function not implemented|Operation not permitted/);
      const rsync = await sh(`rsync -aH ${source}/ ${join(mount, "rs")}/`);
      expect(rsync.code).not.toBe(0);
      expect(rsync.stderr).toMatch(/Function not implemented|Operation not permitted/);
    });
  }
});
