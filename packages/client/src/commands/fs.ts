// `diverge fs tree|read|write`: the container's filesystem through its proxy's paths transport.
// Each run is one independent opening of /filesystem/tree, /filesystem/read or /filesystem/write.
import { createReadStream, createWriteStream } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";
import { filesystemPaths } from "../families/filesystem/paths.js";
import { FilesystemError } from "../families/filesystem/errors.js";
import { exitStatusHelp, fail } from "./exit.js";

export const fsUsage = "  fs         the container's filesystem through its proxy's paths: tree, read or write a file";

const help = `Usage:
  diverge fs tree  [--ignore <path>]… [--count <n>] [flags]   print the tree's frames as JSON lines: a
                                                              Snapshot, then one delta per change, until
                                                              interrupted (or --count frames)
  diverge fs read  <path> [--out <file>] [flags]              the file's bytes to stdout (or --out)
  diverge fs write <path> [--in <file>]  [flags]              replace the file with stdin (or --in), whole

Paths are in the container, from its root (the proxy's --root): /etc/hosts or etc/hosts.
Each run is one independent opening of /filesystem/tree, /filesystem/read or /filesystem/write;
run it as often as you like.

Flags:
  --proxy <url>     the proxy's provider-facing address (default ws://127.0.0.1:14979)
  --ignore <path>   tree: leave this path out (repeatable); /proc, /sys and /dev always are
  --count <n>       tree: stop after n frames
  --out <file>      read: write the bytes here instead of stdout
  --in <file>       write: take the bytes from here instead of stdin
  -h, --help        this text

${exitStatusHelp}
`;

/** `/etc/hosts` → `["etc", "hosts"]`: components as given; the proxy checks them. */
export function components(path: string): string[] {
  return path.split("/").filter((c, i, all) => !(c === "" && (i === 0 || i === all.length - 1)));
}

/** A frame as JSON: the filetree's u64s are bigints, written as numbers. */
export function frameJson(frame: unknown): string {
  return JSON.stringify(frame, (_key, value) => (typeof value === "bigint" ? Number(value) : value));
}

export async function runFs(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        proxy: { type: "string", default: "ws://127.0.0.1:14979" },
        ignore: { type: "string", multiple: true },
        count: { type: "string" },
        out: { type: "string" },
        in: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (problem) {
    process.stderr.write(`${(problem as Error).message}\n\n${help}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(help);
    return 0;
  }
  const usage = (message: string) => {
    process.stderr.write(`${message}\n\n${help}`);
    return 2;
  };
  const fs = filesystemPaths(values.proxy);
  const [command, path, ...extra] = positionals;
  if (extra.length > 0) return usage(`unexpected ${extra.join(" ")}`);
  try {
    switch (command) {
      case "tree": {
        if (path !== undefined) return usage(`fs tree takes no path (got ${path})`);
        const count = values.count === undefined ? Infinity : Number(values.count);
        if (!(count > 0)) return usage("--count must be a positive number");
        const stop = new AbortController();
        const onSignal = () => stop.abort();
        process.once("SIGINT", onSignal);
        let seen = 0;
        try {
          for await (const frame of fs.tree({ ignore: (values.ignore ?? []).map(components), signal: stop.signal })) {
            process.stdout.write(`${frameJson(frame)}\n`);
            if (++seen >= count) break;
          }
        } finally {
          process.off("SIGINT", onSignal);
        }
        return 0;
      }
      case "read": {
        if (path === undefined) return usage("fs read needs a path");
        const out = values.out === undefined ? process.stdout : createWriteStream(values.out);
        await pipeline(Readable.fromWeb(fs.read(components(path)) as never), out as Writable);
        return 0;
      }
      case "write": {
        if (path === undefined) return usage("fs write needs a path");
        const source = values.in === undefined ? process.stdin : createReadStream(values.in);
        await fs.write(components(path), source as AsyncIterable<Uint8Array>);
        return 0;
      }
      default:
        return usage(command ? `unknown fs command ${command}` : "fs needs a command: tree, read or write");
    }
  } catch (problem) {
    if (problem instanceof FilesystemError) return fail(problem);
    throw problem;
  }
}
