// Real programs on a FUSE mount (issue 25), a real kernel mount served through a real proxy, on both
// transports: git, sqlite3 in WAL mode, make, tar x, rsync -a, cp -a and du give inside the mount
// what they give on a plain directory. The harness (proxy, mounts, shell) is fuse-harness.ts. The
// programs run as child processes: this process serves the mount.
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { base, mountProvider, ok, provider, sh, unavailable, useFuseHarness } from "./fuse-harness.js";

useFuseHarness();

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
