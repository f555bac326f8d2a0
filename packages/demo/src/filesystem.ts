// The filesystem part of `pnpm demo` (fs-fuse.md): the provider watches the container's tree (a
// Snapshot, then a delta when a file changes), reads and writes a file in it, and mounts a directory
// of its own in the container with FUSE, where a program of the container reads and writes files
// that live with the provider. First on the multiplexed connection, then on the paths transport.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, realpath, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectProxy, filesystemPaths, LiveTree, openContainer, PathsMounts, type FiletreeFrame, type TreeStream } from "@diverge/client";
import { fuseUnavailable, startProxy } from "@diverge/server";

function show(label: string, value: unknown): void {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s+/g, " ");
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

/** One frame, briefly: `Inserted notes/today.txt (file, 18 bytes)`. */
function describe(frame: FiletreeFrame): string {
  if (frame.variant === "Snapshot") return `Snapshot (${frame.children.length} entries at the root)`;
  const path = frame.path.join("/");
  if (frame.variant === "Removed") return `Removed ${path}`;
  const node = frame.node;
  return `${frame.variant} ${path} (${node.variant === "File" ? `file, ${node.size ?? "?"} bytes` : node.variant.toLowerCase()})`;
}

/** The next frame of a tree, within 10 s. */
async function nextFrame(frames: AsyncIterator<FiletreeFrame>): Promise<FiletreeFrame> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const step = await Promise.race([
      frames.next(),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("no tree frame within 10 s")), 10_000))),
    ]);
    if (step.done) throw new Error("the tree ended");
    return step.value;
  } finally {
    clearTimeout(timer);
  }
}

/** A program of the container: a Node process of its own, working in `dir` (the mount) with ordinary file calls. */
function program(dir: string): Promise<string> {
  const source = `
    import * as fs from "node:fs/promises";
    const dir = ${JSON.stringify(dir)};
    const rows = (await fs.readFile(dir + "/input.csv", "utf8")).trim().split("\\n").slice(1);
    const total = rows.reduce((sum, row) => sum + Number(row.split(",")[1]), 0);
    await fs.writeFile(dir + "/total.txt", "total " + total + "\\n");
    const listing = (await fs.readdir(dir)).sort().join(", ");
    process.stdout.write("read " + rows.length + " rows of input.csv, wrote total.txt; the mount now holds " + listing);
  `;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--input-type=module", "-e", source], { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout))),
  );
}

interface Side {
  readonly transport: "multiplexed" | "paths";
  tree(): TreeStream;
  read(path: readonly string[]): ReadableStream<Uint8Array>;
  write(path: readonly string[], content: string): Promise<void>;
  /** Mounts `provider` at `at` in the container. */
  mount(at: readonly string[], provider: string): Promise<void>;
}

async function text(stream: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(stream).text();
}

async function walkThrough(side: Side, root: string, provider: string): Promise<void> {
  const t = side.transport;
  // The tree: a Snapshot, then one delta when something in the container changes.
  const stream = side.tree();
  const frames = stream[Symbol.asyncIterator]();
  const live = new LiveTree();
  const snapshot = await nextFrame(frames);
  live.apply(snapshot);
  show(`tree (${t})`, `${describe(snapshot)}: ${live.paths().join(", ")}`);
  const note = `notes-${t}.txt`;
  // Written beside the tree and moved in whole, as a program saves a file: the one delta is the
  // file complete (a plain write can be seen between its creation and its bytes, a second delta).
  const draft = join(root, "..", note);
  await writeFile(draft, `written in the container\n`);
  await rename(draft, join(root, note));
  let delta: FiletreeFrame;
  do delta = await nextFrame(frames);
  while (delta.variant !== "Snapshot" && delta.path.join("/") !== note);
  live.apply(delta);
  show("  → delta", `${describe(delta)}; the live tree now has ${live.paths().length} paths`);
  stream.stop();
  await frames.return?.();

  // A read and a write of a file in the container.
  show(`read (${t})`, "etc/app.conf");
  show("  → bytes", await text(side.read(["etc", "app.conf"])));
  show(`write (${t})`, `etc/app.conf ← "mode = ${t}"`);
  await side.write(["etc", "app.conf"], `mode = ${t}\n`);
  show("  → on disk", await readFile(join(root, "etc", "app.conf"), "utf8"));

  // A FUSE mount: the provider's directory inside the container.
  const unavailable = fuseUnavailable();
  if (unavailable) {
    show(`mount (${t})`, `FUSE part skipped: ${unavailable}`);
    return;
  }
  const at = `workspace-${t}`;
  await side.mount([at], provider);
  show(`mount (${t})`, `FUSE: the provider's ${provider} at /${at} in the container`);
  show("  program in container", await program(join(root, at)));
  show("  → on the provider", `total.txt: ${(await readFile(join(provider, "total.txt"), "utf8")).trim()}`);
  await rm(join(provider, "total.txt"));
}

export async function runFilesystemDemo(): Promise<void> {
  process.stdout.write("\nThe container's filesystem: tree, read, write, and a FUSE mount the provider serves (fs-fuse.md)\n");
  const base = await realpath(await mkdtemp(join(tmpdir(), "diverge-demo-fs-")));
  const root = join(base, "container");
  const provider = join(base, "provider");
  await mkdir(join(root, "etc"), { recursive: true });
  await mkdir(provider);
  await writeFile(join(root, "etc", "app.conf"), "mode = demo\n");
  await writeFile(join(root, "README"), "the container's own files\n");
  await writeFile(join(provider, "input.csv"), "item,amount\napples,3\npears,4\nplums,5\n");
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, secretsGate: false, log: () => {} });
  show("proxy", `ws://127.0.0.1:${proxy.port}, --root ${root}`);
  show("provider directory", `${provider} (input.csv)`);
  const url = `ws://127.0.0.1:${proxy.port}`;
  const connection = await openContainer(`${url}/`);
  const mounts = new PathsMounts(url);
  const answering = connectProxy(url, { ...mounts.handlers() });
  try {
    process.stdout.write("-- on the multiplexed connection (filesystem::tree, ::read, ::write, fuse::mount)\n");
    await walkThrough(
      {
        transport: "multiplexed",
        tree: () => connection.tree(),
        read: (path) => connection.read(path),
        write: (path, content) => connection.write(path, content),
        mount: async (at, dir) => void (await connection.mount(at, dir)),
      },
      root,
      provider,
    );
    process.stdout.write("-- on the paths transport (/filesystem/tree, /read, /write, /fuse/mount and /requests kinds 12-18)\n");
    await answering.whenConnected({ timeoutMs: 10_000 });
    const paths = filesystemPaths(url);
    await walkThrough(
      {
        transport: "paths",
        tree: () => paths.tree(),
        read: (path) => paths.read(path),
        write: (path, content) => paths.write(path, content),
        mount: async (at, dir) => void (await mounts.mount(at, dir)),
      },
      root,
      provider,
    );
  } finally {
    await bounded("the paths connection's close", answering.close());
    await bounded("the multiplexed connection's close", connection.close());
    // The proxy unmounts what it mounted as it closes.
    await bounded("the proxy's close (unmounting its FUSE mounts)", proxy.close());
    await rm(base, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Waits for a step of the clean-up at most 15 s, then says so and goes on: the demo ends either way.
 * (Once, on a machine at load 17, one of these never finished; it did not happen again in 18 runs.)
 */
async function bounded(what: string, step: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), 15_000)));
  const outcome = await Promise.race([step.then(() => "done" as const, () => "done" as const), late]);
  clearTimeout(timer);
  if (outcome === "late") process.stderr.write(`demo: ${what} did not finish within 15 s; going on\n`);
}
