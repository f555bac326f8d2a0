// A Snapshot's cost in the proxy: the walk stats a bounded number of entries at a time and keeps
// one compact record per entry, so its heap peak stays within a few times the message it makes
// (issue 24: 100,000 files once peaked at +540 MB for a 2.8 MB message). FILES sets the count
// (default 20,000 in the suite; 100,000 measured for the README).
import { execFileSync } from "node:child_process";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeTreeResponse } from "@diverge/codec";
import { afterEach, expect, it } from "vitest";
import { watchTree } from "../src/families/filesystem/index.js";

const FILES = Number(process.env.FILES ?? 20_000);
let base: string | undefined;
afterEach(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

it(`a Snapshot of ${FILES} files peaks the heap within 10 times its message size (plus a fixed 32 MB)`, { timeout: 120_000 }, async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fs-memory-")));
  // Directories of 1,000 empty files, made at once by python (node's one by one is slow).
  const script = "import os,sys\nfor d in range(int(sys.argv[2])):\n p=os.path.join(sys.argv[1],'dir-%d'%d); os.mkdir(p)\n for f in range(1000): open(os.path.join(p,'file-%05d.txt'%f),'w').close()";
  execFileSync("python3", ["-c", script, base, String(Math.ceil(FILES / 1000))]);
  (globalThis as { gc?: () => void }).gc?.();
  const usage = () => {
    const m = process.memoryUsage();
    return { heap: m.heapUsed + m.arrayBuffers, rss: m.rss };
  };
  const before = usage();
  let peak = before;
  const sampler = setInterval(() => {
    const now = usage();
    peak = { heap: Math.max(peak.heap, now.heap), rss: Math.max(peak.rss, now.rss) };
  }, 2);
  let bytes = 0;
  let children = 0;
  const started = Date.now();
  try {
    const watch = watchTree(base, { ignore: [] });
    const first = await watch.next();
    if (first.done || first.value.variant !== "Snapshot") throw new Error("no snapshot");
    children = first.value.children.length;
    bytes = encodeTreeResponse({ variant: "Frame", frame: first.value }).length;
    await watch.return?.();
  } finally {
    clearInterval(sampler);
  }
  const heapPeak = peak.heap - before.heap;
  const rssPeak = peak.rss - before.rss;
  console.log(`snapshot of ${FILES} files: ${bytes} bytes; heap peak +${(heapPeak / 1e6).toFixed(1)} MB, rss peak +${(rssPeak / 1e6).toFixed(1)} MB (the watcher's native crawl included), ${Date.now() - started} ms`);
  expect(children).toBe(Math.ceil(FILES / 1000));
  // Generous: 10 times the message, plus a fixed 32 MB for what any walk costs (the watcher's module,
  // garbage the collector has not reached yet: 10-19 MB seen for 20,000 files, the higher under CI's
  // full load). Measured: 100,000 files, 3.0 MB message, heap peak +25.6 MB. The bug this guards
  // against cost ~5.4 KB an entry (+540 MB for 100,000 files, ~108 MB for 20,000).
  expect(heapPeak).toBeLessThan(10 * bytes + 32e6);
});
