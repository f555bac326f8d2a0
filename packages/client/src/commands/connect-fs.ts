// `diverge connect --mount <container-path>=<provider-dir>[:ro]` and `--watch-tree [--ignore <path>]…`:
// the container's filesystem held by the long-lived command, on either transport. Mounts are made
// once the connection serves (on the multiplexed one after the begin, before any other scope, as the
// spec orders it); the tree's frames go to stdout as JSON lines until the command stops.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { statSync } from "node:fs";
import { resolve } from "node:path";
import { FilesystemError } from "../families/filesystem/errors.js";
import { filesystemPaths } from "../families/filesystem/paths.js";
import type { PathsMounts } from "../families/fuse/paths.js";
import type { TreeStream } from "../families/filesystem/multiplexed.js";
import type { MultiplexedConnection } from "../multiplexed/container.js";
import { LiveTree, type FiletreeFrame } from "../families/filesystem/tree.js";
import { Exit, type ExitStatus } from "./exit.js";
import { components, frameJson } from "./fs.js";

/** The flags this section adds to `diverge connect` (node:util parseArgs options). */
export const connectFsOptions = {
  mount: { type: "string", multiple: true },
  "watch-tree": { type: "boolean", default: false },
  ignore: { type: "string", multiple: true },
} as const;

export const connectFsUsage = `    [--mount <container-path>=<provider-dir>[:ro]]...                          FUSE mounts served from here
    [--watch-tree [<root>] [--ignore <path>]...]   the container's tree as JSON lines on stdout`;

export const connectFsHelp = `  --mount <container-path>=<provider-dir>[:ro]
                            ask the proxy to mount FUSE at <container-path> (in the container, from its
                            root) and serve every operation there from <provider-dir> on this machine;
                            :ro refuses every change (the program sees EROFS). Repeatable. Multiplexed:
                            a fuse::mount scope each, after the begin; paths: /fuse/mount, the
                            operations asked on /requests (whole files; no chmod/utimes/truncate asks
                            on that transport). The proxy unmounts when it ends (multiplexed: when
                            this connection ends).
  --watch-tree [<root>]     print the container's tree (the proxy's --root) on stdout, one JSON frame a
                            line: a Snapshot, then one delta per change (Inserted/Modified/Removed),
                            a fresh Snapshot after lost events, until this command stops. With <root>
                            (a path in the container) only that subtree, as if it were the root:
                            paths from <root>, a fresh Snapshot whenever <root> itself changes
  --ignore <path>           --watch-tree: leave this path out (repeatable); /proc, /sys, /dev always are,
                            and so are this command's own --mount paths (it serves those files itself)`;

export interface MountSpec {
  /** As given, for messages. */
  readonly text: string;
  /** The mount point: components from the container's root. */
  readonly path: string[];
  /** The provider's directory, absolute. */
  readonly dir: string;
  readonly readonly: boolean;
}

/**
 * `--watch-tree [<root>]`: node:util's parseArgs has no optional values, so the root (the argument
 * right after `--watch-tree`, when there is one and it is not a flag) is taken out first.
 */
export function takeWatchTreeRoot(args: readonly string[]): { args: string[]; root: string | undefined } {
  const at = args.indexOf("--watch-tree");
  const next = at < 0 ? undefined : args[at + 1];
  if (next === undefined || next.startsWith("-")) return { args: [...args], root: undefined };
  return { args: [...args.slice(0, at + 1), ...args.slice(at + 2)], root: next };
}

/**
 * The tree under `root` as a tree of its own: frames outside it dropped, paths made relative to it,
 * and a Snapshot of its entries whenever the frames replace or remove it (or a directory above it).
 * The proxy watches the whole tree either way: the request has no root.
 */
export function subtreeFrames(root: readonly string[]): (frame: FiletreeFrame) => FiletreeFrame | undefined {
  if (root.length === 0) return (frame) => frame;
  const whole = new LiveTree();
  const snapshot = (): FiletreeFrame => {
    const node = whole.get(root);
    return { variant: "Snapshot", children: node?.variant === "Directory" ? node.children : [] };
  };
  return (frame) => {
    whole.apply(frame);
    if (frame.variant === "Snapshot") return snapshot();
    const inside = frame.path.length > root.length && root.every((component, i) => frame.path[i] === component);
    if (inside) return { ...frame, path: frame.path.slice(root.length) } as FiletreeFrame;
    const above = frame.path.length <= root.length && frame.path.every((component, i) => root[i] === component);
    return above ? snapshot() : undefined;
  };
}

/** `--mount` values, checked: the specs, or the usage message saying what is wrong. */
export function parseMountSpecs(values: readonly string[] | undefined): MountSpec[] | string {
  const specs: MountSpec[] = [];
  for (const text of values ?? []) {
    const at = text.indexOf("=");
    if (at <= 0 || at === text.length - 1) return `--mount ${text}: expected <container-path>=<provider-dir>[:ro]`;
    let dir = text.slice(at + 1);
    let readonly = false;
    if (dir.endsWith(":ro")) {
      readonly = true;
      dir = dir.slice(0, -3);
    } else if (dir.endsWith(":rw")) dir = dir.slice(0, -3);
    const path = components(text.slice(0, at));
    if (path.length === 0) return `--mount ${text}: the container path names the root`;
    dir = resolve(dir);
    let isDirectory = false;
    try {
      isDirectory = statSync(dir).isDirectory();
    } catch {
      return `--mount ${text}: ${dir} does not exist`;
    }
    if (!isDirectory) return `--mount ${text}: ${dir} is not a directory`;
    if (specs.some((s) => s.path.join("/") === path.join("/"))) return `--mount ${text}: /${path.join("/")} is mounted twice`;
    specs.push({ text, path, dir, readonly });
  }
  return specs;
}

/** Where the mounts and the tree go: the multiplexed connection, or the paths transport's endpoints. */
export type FilesystemTarget = { readonly transport: "multiplexed"; readonly connection: MultiplexedConnection } | { readonly transport: "paths"; readonly proxy: string; readonly mounts: PathsMounts };

export interface HeldFilesystem {
  /** Settles with the exit status when the tree ends on its own (an error); never while it is healthy. */
  readonly ended: Promise<ExitStatus>;
  /** Stops the tree. */
  close(): Promise<void>;
}

/** The exit status a filesystem failure ends the command with. */
export function filesystemExit(problem: FilesystemError): ExitStatus {
  switch (problem.detail.variant) {
    case "Lost":
      return Exit.Lost;
    case "Unreachable":
      return Exit.Unreachable;
    default:
      return Exit.ExchangeFailed;
  }
}

/**
 * Makes every mount (in order; the first refusal rejects with its FilesystemError) and starts the
 * tree when asked. Each mount and the tree say one line on stderr through `say`.
 */
export async function holdFilesystem(
  target: FilesystemTarget,
  options: { mounts: readonly MountSpec[]; watchTree: boolean; root?: string; ignore: readonly string[]; say: Say; error?: Say },
): Promise<HeldFilesystem> {
  for (const spec of options.mounts) {
    const where = `/${spec.path.join("/")}`;
    if (target.transport === "multiplexed") await target.connection.mount(spec.path, spec.dir, { kind: "directory", readonly: spec.readonly });
    else await target.mounts.mount(spec.path, spec.dir, { kind: "directory", readonly: spec.readonly });
    options.say(...logEvent(`mounted {where} from {dir}${spec.readonly ? " (read-only)" : ""}`, { where, dir: spec.dir }));
  }
  if (!options.watchTree) return { ended: new Promise<ExitStatus>(() => {}), close: async () => {} };
  // The provider leaves its own FUSE mounts out of the tree (fs-fuse.md §5.1): it serves those files itself.
  const ignore = [...options.ignore.map(components), ...options.mounts.map((spec) => spec.path)];
  const tree: TreeStream = target.transport === "multiplexed" ? target.connection.tree({ ignore }) : filesystemPaths(target.proxy).tree({ ignore });
  const within = subtreeFrames(components(options.root ?? "/"));
  const error: Say = options.error ?? ((line) => void process.stderr.write(`${line}\n`));
  let closing = false;
  const ended = (async (): Promise<ExitStatus> => {
    try {
      let frames = 0;
      for await (const received of tree) {
        const frame = within(received);
        if (!frame) continue;
        if (frames++ === 0) options.say(...logEvent(`tree${options.root ? " of {root}" : ""}: Snapshot`, options.root ? { root: options.root } : undefined));
        process.stdout.write(`${frameJson(frame)}\n`);
      }
      if (closing) return Exit.Ok;
      error("the container's tree ended");
      return Exit.ExchangeFailed;
    } catch (problem) {
      if (closing) return Exit.Ok;
      error(...logEvent("{error}", { error: (problem as Error).message }));
      return problem instanceof FilesystemError ? filesystemExit(problem) : Exit.Failed;
    }
  })();
  return {
    // Only an end of its own counts: a stop asked by close() never settles it.
    ended: ended.then((status) => (closing ? new Promise<ExitStatus>(() => {}) : status)),
    async close() {
      closing = true;
      tree.stop();
      // The stop's answer is the scope's finish; a proxy that never sends it is not waited for long.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((resolve) => (timer = setTimeout(resolve, 2000)))]);
      clearTimeout(timer);
    },
  };
}
