// The tree never enters a FUSE mount this proxy serves: a real kernel mount whose provider never
// answers (dead or stuck) sits under the root, and tree walks and watches still finish.
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FuseHandlers } from "@diverge/multiplexer/fuse";
import type { FiletreeNode } from "@diverge/codec";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fuseUnavailable, mountFuse, type FuseMount } from "../src/families/fuse/index.js";
import { snapshotOf, watchTree } from "../src/families/filesystem/index.js";

const unavailable = fuseUnavailable();
const never = () => new Promise<never>(() => {});
// A provider that never answers anything.
const dead: FuseHandlers = { read: never, write: never, list: never, remove: never, rename: never, mkdir: never, stat: never, truncate: never, setattr: never };

let base: string;
let root: string;
let mount: FuseMount | undefined;
beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fs-fuse-")));
  root = join(base, "root");
  await mkdir(join(root, "sub"), { recursive: true });
  await writeFile(join(root, "sub", "file"), "");
});
afterAll(async () => {
  await mount?.close();
  await rm(base, { recursive: true, force: true });
});

const names = (nodes: readonly FiletreeNode[]): string[] => nodes.flatMap((n) => [n.name, ...(n.variant === "Directory" ? names(n.children) : [])]);
/** `work`, or a failure once a generous deadline passes (a hang must fail the test, not the suite). */
const guarded = <T>(work: Promise<T>) =>
  Promise.race([work, new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the walk hung")), 20_000).unref())]);

describe.skipIf(!!unavailable)("a served FUSE mount whose provider never answers, under the root", () => {
  it("is left out of every walk and watch, which finish", { timeout: 120_000 }, async () => {
    mount = await mountFuse({ root, path: ["sub", "mnt"], kind: "directory", handlers: dead });
    for (let i = 0; i < 4; i++) {
      const snapshot = await guarded(snapshotOf(root));
      expect(names(snapshot.children).sort()).toEqual(["file", "sub"]);
    }
    const watch = watchTree(root, { ignore: [] });
    const first = await guarded(watch.next());
    expect(first.done).toBe(false);
    expect(names((first.value as { children: FiletreeNode[] }).children).sort()).toEqual(["file", "sub"]);
    await watch.return?.();
  });
});
