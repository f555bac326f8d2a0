// The mount point stays beneath the root whatever the program does meanwhile: a swap loop exchanges
// a directory of the asked path with a symlink leading outside the root (renameat2
// RENAME_EXCHANGE), while mounts are asked there again and again; every mount that is made must lie
// beneath the root (checked in /proc/self/mountinfo), and nothing is ever made outside.
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startSwapLoop } from "../../multiplexer/test/swap-loop.js";
import { fuseUnavailable, mountFuse, MountError, type FuseHandlers } from "../src/families/fuse/index.js";

const unavailable = fuseUnavailable();

let base: string;
beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-race-")));
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const nothing: FuseHandlers = {
  read: async () => ({ kind: "missing" }),
  write: async () => ({ kind: "readOnly" }),
  list: async () => ({ kind: "entries", entries: [] }),
  remove: async () => ({ kind: "readOnly" }),
  rename: async () => ({ kind: "readOnly" }),
  mkdir: async () => ({ kind: "readOnly" }),
  stat: async () => ({ kind: "missing" }),
  truncate: async () => ({ kind: "readOnly" }),
  setattr: async () => ({ kind: "readOnly" }),
};

const mountPoints = async () =>
  (await readFile("/proc/self/mountinfo", "utf8"))
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(base));

describe.skipIf(!!unavailable)("the FUSE mount point under a swap loop", () => {
  it("every mount made lands beneath the root; nothing is made outside it (thousands of attempts)", async () => {
    const root = join(base, "root");
    const outside = join(base, "outside");
    await mkdir(join(root, "d"), { recursive: true });
    // Directories where the cheap attempts ask a file mount (refused at the type check once placed).
    for (let i = 0; i < 50; i++) await mkdir(join(root, "d", `p${i}`));
    await mkdir(outside);
    // `l` leads outside; the loop exchanges `d` and `l`, so `d` is now a directory, now that link.
    await symlink(outside, join(root, "l"));
    const loop = await startSwapLoop(join(root, "d"), join(root, "l"));
    let made = 0;
    let refused = 0;
    const landed: string[] = [];
    try {
      const deadline = Date.now() + 90_000;
      for (let i = 0; i < 3000 && Date.now() < deadline; i++) {
        // One in four a real mount (a fresh name, missing parents made too, or one already there);
        // the others run the whole placement through the swapping directory and stop at its type
        // check (a file mount asked on a directory), which is cheap: thousands of attempts.
        const real = i % 4 === 0;
        const components = real ? (i % 8 === 0 ? ["d", `m${i}`, "deep"] : ["d", `m${i % 7}`]) : ["d", `p${i % 50}`];
        let mount;
        try {
          mount = await mountFuse({ root, path: components, kind: real ? "directory" : "file", handlers: nothing });
        } catch (error) {
          expect(error).toBeInstanceOf(MountError);
          expect((error as Error).message).not.toContain(base);
          refused++;
          continue;
        }
        made++;
        const points = await mountPoints();
        landed.push(...points);
        await mount.close();
      }
    } finally {
      loop.kill("SIGKILL");
    }
    const attempts = made + refused;
    console.log(`swap race: ${attempts} attempts, ${made} mounted, ${refused} refused`);
    expect(attempts).toBeGreaterThanOrEqual(500);
    expect(made).toBeGreaterThan(0);
    for (const point of landed) expect(point.startsWith(root + "/")).toBe(true);
    expect(await readdir(outside)).toEqual([]);
    expect(await mountPoints()).toEqual([]);
  }, 120_000);
});
