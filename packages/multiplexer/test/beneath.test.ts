import { lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSwapLoop } from "./swap-loop.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Beneath, BeneathError, chmodAt, openAt, readdirAt } from "../src/beneath.js";
import { constants } from "node:fs";
import * as fs from "node:fs";

let base: string;
let root: string;
let outside: string;
let beneath: Beneath;

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "beneath-"));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(join(root, "a", "b"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "a", "b", "f"), "inside");
  await writeFile(join(outside, "f"), "outside");
  await writeFile(join(outside, "secret"), "secret");
  await symlink("b", join(root, "a", "rel"));
  await symlink(join(root, "a", "b"), join(root, "abs-in"));
  await symlink(outside, join(root, "abs-out"));
  await symlink("../../outside", join(root, "up-out"));
  await symlink("loop", join(root, "loop"));
  beneath = await Beneath.open(root);
});

afterAll(async () => {
  await beneath.close();
  await rm(base, { recursive: true, force: true });
});

const readAt = async (components: string[], follow: boolean) =>
  beneath.at(components, async (place) => {
    const fd = await openAt(place, constants.O_RDONLY);
    try {
      return fs.readFileSync(fd, "utf8");
    } finally {
      fs.closeSync(fd);
    }
  }, { follow });

const failure = async (run: () => Promise<unknown>) => {
  try {
    await run();
  } catch (error) {
    return (error as BeneathError).code;
  }
  return "no error";
};

describe("Beneath", () => {
  it("reads through plain directories and refuses links without follow", async () => {
    expect(await readAt(["a", "b", "f"], false)).toBe("inside");
    expect(await failure(() => readAt(["a", "rel", "f"], false))).toBe("ELOOP");
    expect(await failure(() => readAt(["a", "missing", "f"], false))).toBe("ENOENT");
    expect(await failure(() => readAt(["a", "b", "f", "g"], false))).toBe("ENOTDIR");
  });

  it("follows links that stay beneath the root and refuses those that leave it", async () => {
    expect(await readAt(["a", "rel", "f"], true)).toBe("inside");
    expect(await readAt(["abs-in", "f"], true)).toBe("inside");
    expect(await failure(() => readAt(["abs-out", "f"], true))).toBe("EOUTSIDE");
    expect(await failure(() => readAt(["up-out", "f"], true))).toBe("EOUTSIDE");
    expect(await failure(() => readAt(["loop"], true))).toBe("ELOOP");
  });

  it("refuses components that are not names", async () => {
    for (const bad of [[".."], ["a", "."], [""], ["a/b"], ["a\0"]]) expect(await failure(() => beneath.resolve(bad))).toBe("EINVAL");
  });

  it("acts on a link itself, never its target, at the last component", async () => {
    await symlink(join(outside, "secret"), join(root, "to-secret"));
    const before = (await lstat(join(outside, "secret"))).mode & 0o777;
    expect(await failure(() => beneath.at(["to-secret"], (place) => chmodAt(place, 0o600), { last: "keep" }))).toBe("ELOOP");
    expect((await lstat(join(outside, "secret"))).mode & 0o777).toBe(before);
    const entries = await beneath.at(["a"], (place) => readdirAt(place));
    expect(entries.map((e) => e.name).sort()).toEqual(["b", "rel"]);
  });

  it("never reads outside the root while a directory on the path is swapped for a link, over thousands of attempts", async () => {
    // root/race/d is a directory holding f ("inside"); root/race/swap is a link to the outside
    // directory holding f ("outside"). The loop exchanges the two names as fast as it can.
    await mkdir(join(root, "race", "d"), { recursive: true });
    await writeFile(join(root, "race", "d", "f"), "inside");
    await symlink(outside, join(root, "race", "swap"));
    const loop = await startSwapLoop(join(root, "race", "d"), join(root, "race", "swap"));
    const seen: Record<string, number> = {};
    try {
      for (let i = 0; i < 4000; i++) {
        for (const follow of [false, true]) {
          const what = await readAt(["race", "d", "f"], follow).catch((error: BeneathError) => error.code);
          seen[what] = (seen[what] ?? 0) + 1;
        }
      }
    } finally {
      loop.kill("SIGKILL");
    }
    expect(seen.outside).toBeUndefined();
    expect(seen.inside).toBeGreaterThan(0);
    // The loop really raced: some attempts met the link in place of the directory.
    expect((seen.ELOOP ?? 0) + (seen.EOUTSIDE ?? 0)).toBeGreaterThan(0);
    expect(await readFile(join(outside, "f"), "utf8")).toBe("outside");
  });
});
