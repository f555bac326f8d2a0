// Real programs on a FUSE mount (issue 25), a real kernel mount served through a real proxy, on both
// transports: git, sqlite3 in WAL mode, make, tar x, rsync -a, cp -a and du give inside the mount
// what they give on a plain directory. The harness is fuse-posix.test.ts's (the POSIX probe). The
// programs run as child processes: this process serves the mount.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, realpath, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fuseUnavailable, startProxy, type RunningProxy } from "@diverge/server";
import { PathsMounts, connectProxy, directoryHandlers, openContainer, type FuseHandlers, type MultiplexedConnection, type PathsConnection } from "../src/index.js";

const unavailable = fuseUnavailable();
if (unavailable) console.log(`FUSE POSIX tests skipped: ${unavailable}`);
const PROBE = fileURLToPath(new URL("./fuse-probe.py", import.meta.url));

let base: string;
let root: string;
let provider: string;
let proxy: RunningProxy | undefined;
let container: MultiplexedConnection | undefined;
let answering: PathsConnection | undefined;
let logged: string[] = [];

async function start(maxMessageBytes?: number): Promise<void> {
  proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root, log: (line) => logged.push(line), ...(maxMessageBytes ? { maxMessageBytes } : {}) });
}

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "diverge-fuse-posix-")));
  root = join(base, "container");
  provider = join(base, "provider");
  await mkdir(root);
  await mkdir(provider);
  logged = [];
});
afterEach(async () => {
  await container?.close();
  await answering?.close();
  await proxy?.close();
  container = answering = proxy = undefined;
  await rm(base, { recursive: true, force: true });
});

type Transport = "multiplexed" | "paths";

/** Counts of the whole-file asks the provider answered (paths). */
const counted = { fuseRead: 0, fuseWrite: 0 };

async function mountProvider(transport: Transport, target: FuseHandlers | string = provider, maxMessageBytes?: number): Promise<string> {
  if (!proxy) await start(maxMessageBytes);
  const url = `ws://127.0.0.1:${proxy!.port}`;
  if (transport === "multiplexed") {
    container = await openContainer(url);
    await container.mount(["m"], target);
  } else {
    const mounts = new PathsMounts(url, maxMessageBytes ? { maxMessageBytes } : {});
    const handlers = mounts.handlers();
    counted.fuseRead = counted.fuseWrite = 0;
    answering = connectProxy(url, {
      ...handlers,
      fuseRead: (ask) => (counted.fuseRead++, handlers.fuseRead(ask)),
      fuseWrite: (ask) => (counted.fuseWrite++, handlers.fuseWrite(ask)),
    });
    await answering.whenConnected({ timeoutMs: 10_000 });
    await mounts.mount(["m"], target);
  }
  return join(root, "m");
}

/**
 * A shell command, in `cwd` by its own `cd`: never as the child's working directory, which it enters
 * while this process waits for it to start (a mount this process serves would wait on itself).
 */
function sh(command: string, cwd?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile("sh", ["-c", cwd ? `cd '${cwd}' && ${command}` : command], { timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, LC_ALL: "C" } }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}
async function ok(command: string, cwd?: string): Promise<string> {
  const r = await sh(command, cwd);
  if (r.code !== 0) throw new Error(`${command}: exit ${r.code}\n${r.stderr}`);
  return r.stdout;
}

describe.skipIf(!!unavailable)("real programs on a FUSE mount", () => {
  for (const transport of ["multiplexed", "paths"] as const) {
    it(`${transport}: git, sqlite3 (WAL), make, tar x, rsync -a, cp -a and du give what they give on a plain directory`, { timeout: 120_000 }, async () => {
      const mount = await mountProvider(transport);
      const plain = join(base, "plain");
      await mkdir(plain);
      // A source tree without links: files 0644, directories 0755 (the paths transport's own modes), odd times.
      const source = join(base, "source");
      await ok(
        `mkdir -p ${source}/a/b/c ${source}/d && for i in $(seq 1 16); do printf 'line %s\\n' $(seq 1 $i) > ${source}/a/f$i.txt; done && ` +
          `head -c 300000 /dev/urandom > ${source}/a/b/c/blob && : > ${source}/d/empty && chmod -R u=rwX,go=rX ${source} && ` +
          `touch -d @1600000000.123456789 ${source}/a/f1.txt && touch -d @1500000000 ${source}/a/b/c/blob`,
      );
      const script = [
        "set -e",
        // git: a repository made, committed, checked.
        "mkdir repo && cd repo && git init -q && cp -r ../src/. . && git add -A && GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z' git -c user.name=t -c user.email=t@t commit -qm one && git rev-parse HEAD && git fsck --no-progress 2>&1 && git status --porcelain && cd ..",
        // sqlite3 in WAL mode.
        "sqlite3 db.sqlite 'PRAGMA journal_mode=WAL;' 'CREATE TABLE t(a INTEGER, b TEXT);' && for i in $(seq 1 20); do sqlite3 db.sqlite \"BEGIN; INSERT INTO t VALUES($i, 'row $i'); INSERT INTO t SELECT a+1000, b FROM t WHERE a=$i; COMMIT;\"; done && sqlite3 db.sqlite 'SELECT count(*), sum(a) FROM t;' 'PRAGMA integrity_check;'",
        // make: built, up to date, rebuilt after an edit.
        "mkdir mk && cd mk && printf 'out: in\\n\\tcp in out\\n' > Makefile && echo 1 > in && make -s && make | grep -c 'up to date' && sleep 0.05 && echo 2 > in && make && cat out && cd ..",
        // tar x, cp -a, rsync -a (twice: the second copies nothing), then the trees compared.
        "mkdir tx && tar -C src -cf - . | tar -C tx -xf -",
        "cp -a src ca",
        "rsync -a src/ rs/ && rsync -a --itemize-changes src/ rs/ | wc -l",
        "for d in tx ca rs; do (cd $d && find . -printf '%P %y %m %s %T@\\n' | sort && find . -type f -exec sha256sum {} + | sort); done",
        "du -ak tx ca rs | sort -k2",
      ].join("\n");
      for (const dir of [mount, plain]) await ok(`cp -a ${source} ${join(dir, "src")}`);
      const there = await sh(script, mount);
      const here = await sh(script, plain);
      expect(here.code, here.stderr).toBe(0);
      expect(there.stderr).toBe(here.stderr);
      expect(there.code).toBe(0);
      expect(there.stdout).toBe(here.stdout);
      // And the provider holds what the programs made.
      expect(await ok("git -C repo log --oneline | wc -l", provider)).toBe("1\n");
    });
  }

});
