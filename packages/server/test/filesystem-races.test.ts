// The filesystem service against a hostile program: a renameat2(RENAME_EXCHANGE) swap loop
// exchanging a directory inside the root with a link to outside it, thousands of times during tree
// walks, reads and writes; temporaries left by a proxy that died mid-write. FS_IMPL (a directory of the service's sources) runs the same tests
// against another implementation (how they were seen to fail before the fix).
import { mkdir, mkdtemp, readdir, readFile, realpath, rename, rm, symlink, writeFile as put } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FiletreeNode } from "@diverge/codec";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as current from "../src/families/filesystem/index.js";
import { startSwapLoop } from "../../multiplexer/test/swap-loop.js";

const fsImpl: typeof current = process.env.FS_IMPL ? await import(process.env.FS_IMPL) : current;
const { readPieces, writeFile, watchTree, FsError } = fsImpl;

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fs-races-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(join(root, "d"), { recursive: true });
  await mkdir(outside);
  await put(join(outside, "secret"), "SECRET");
  await put(join(root, "d", "secret"), "inside");
  for (let i = 0; i < 20; i++) await put(join(root, "d", `inside-${i}`), "x");
  // root/d and root/l are exchanged for each other in a loop: a directory inside, a link to outside.
  await symlink(outside, join(root, "l"));
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function swapping<T>(run: () => Promise<T>): Promise<T> {
  const loop = await startSwapLoop(join(root, "d"), join(root, "l"));
  try {
    return await run();
  } finally {
    loop.kill("SIGKILL");
    await new Promise((resolve) => loop.once("exit", resolve));
  }
}

/** The first frame of a watch: its Snapshot. */
async function snapshot(): Promise<FiletreeNode[]> {
  const watch = watchTree(root, { ignore: [] });
  try {
    const first = await watch.next();
    if (first.done || first.value.variant !== "Snapshot") throw new Error("no snapshot");
    return first.value.children;
  } finally {
    await watch.return?.();
  }
}

const everyName = (nodes: readonly FiletreeNode[]): string[] => nodes.flatMap((n) => [n.name, ...(n.variant === "Directory" ? everyName(n.children) : [])]);
const ATTEMPTS = 3000;
/** Attempts stop at ATTEMPTS or after 20 s, whichever comes first (a loaded CI machine is slow, not wrong). */
const inTime = (started: number) => Date.now() - started < 20_000;

describe("swap loop: a directory exchanged with a link to outside the root", () => {
  it(`a tree walk never lists what is outside (${ATTEMPTS} walks)`, { timeout: 120_000 }, async () => {
    await put(join(outside, "outside-only"), "");
    let seen = 0;
    await swapping(async () => {
      const walk = "snapshotOf" in fsImpl ? () => fsImpl.snapshotOf(root).then((s) => s.children) : snapshot;
      for (let i = 0, started = Date.now(); i < ATTEMPTS && inTime(started); i++) {
        const names = everyName(await walk());
        expect(names).not.toContain("outside-only");
        if (names.includes("inside-0")) seen++;
      }
    });
    // The loop ran against the walk: the inside directory was listed, under one name or the other.
    expect(seen).toBeGreaterThan(0);
  });

  it(`a read never reads outside (${ATTEMPTS} reads)`, { timeout: 120_000 }, async () => {
    let inside = 0;
    await swapping(async () => {
      for (let i = 0, started = Date.now(); i < ATTEMPTS && inTime(started); i++) {
        for (const path of [["d", "secret"], ["l", "secret"]]) {
          try {
            const pieces: Uint8Array[] = [];
            for await (const piece of readPieces(root, path)) pieces.push(piece);
            expect(Buffer.concat(pieces).toString()).toBe("inside");
            inside++;
          } catch (error) {
            expect(error).toBeInstanceOf(FsError);
            expect((error as Error).message).not.toContain(base);
          }
        }
      }
    });
    expect(inside).toBeGreaterThan(0);
  });

  it(`a write never writes outside (${ATTEMPTS} writes)`, { timeout: 120_000 }, async () => {
    let written = 0;
    await swapping(async () => {
      for (let i = 0, started = Date.now(); i < ATTEMPTS && inTime(started); i++) {
        try {
          await writeFile(root, [i % 2 ? "d" : "l", `w${i}`], [Buffer.from("x")]);
          written++;
        } catch (error) {
          expect(error).toBeInstanceOf(FsError);
          expect((error as Error).message).not.toContain(base);
        }
      }
    });
    expect(await readdir(outside)).toEqual(["secret"]);
    expect(await readFile(join(outside, "secret"), "utf8")).toBe("SECRET");
    expect(written).toBeGreaterThan(0);
  });
});

describe("a write after a crash", () => {
  it("succeeds whatever temporaries a proxy that died mid-write left beside the file", async () => {
    // What earlier proxies left: the counter-named temporaries of every process that died mid-write.
    for (let n = 1; n <= 50; n++) await put(join(root, `.f.diverge-write-${n}`), "stale");
    await put(join(root, "f"), "old");
    await writeFile(root, ["f"], [Buffer.from("new")]);
    expect(await readFile(join(root, "f"), "utf8")).toBe("new");
    // A second write in the same process, and a long name whose temporary must still fit NAME_MAX.
    await writeFile(root, ["f"], [Buffer.from("newer")]);
    expect(await readFile(join(root, "f"), "utf8")).toBe("newer");
    const long = "n".repeat(255);
    await writeFile(root, [long], [Buffer.from("long")]);
    expect(await readFile(join(root, long), "utf8")).toBe("long");
    // No temporary of ours is left: only the stale ones, untouched.
    const temporaries = (await readdir(root)).filter((name) => name.includes(".diverge-write-"));
    expect(temporaries).toHaveLength(50);
  });
});


describe("a FUSE mount this process serves", () => {
  it("is never entered nor listed by a tree walk (noted by mountFuse)", async () => {
    const { noteServedMount } = await import("../src/families/fuse/served.js");
    await mkdir(join(root, "mnt", "point"), { recursive: true });
    await put(join(root, "mnt", "point", "behind"), "");
    const forget = noteServedMount(join(root, "mnt", "point"));
    try {
      const names = everyName(await snapshot());
      expect(names).toContain("mnt");
      expect(names).not.toContain("point");
      expect(names).not.toContain("behind");
    } finally {
      forget();
    }
    expect(everyName(await snapshot())).toContain("behind");
  });
});

describe("a tree whose root is replaced", () => {
  it("ends with watch: the root was removed or replaced, whether it is removed or moved away", { timeout: 120_000 }, async () => {
    for (const replace of [() => rm(root, { recursive: true }), () => rename(root, `${root}.old`)]) {
      await mkdir(root, { recursive: true });
      const watch = watchTree(root, { ignore: [] });
      expect((await watch.next()).value?.variant).toBe("Snapshot");
      await replace();
      await mkdir(root);
      await put(join(root, "fresh"), "");
      let failure: unknown;
      const guard = setTimeout(() => void watch.return?.(), 20_000);
      try {
        for (;;) if ((await watch.next()).done) break;
      } catch (error) {
        failure = error;
      } finally {
        clearTimeout(guard);
      }
      expect(failure).toBeInstanceOf(FsError);
      expect((failure as InstanceType<typeof FsError>).toJSON()).toEqual({ kind: "watch", error: "the root was removed or replaced" });
      await rm(root, { recursive: true, force: true });
    }
  });
});
