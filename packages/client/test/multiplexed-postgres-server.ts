// A throwaway PostgreSQL server for the tests: initdb into a temp folder, start on a free loopback
// port, stop and remove after. PostgreSQL refuses to run as root, so as root it runs as the
// `postgres` user that Debian's package creates.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

export interface ThrowawayPostgres {
  readonly port: number;
  readonly url: string;
  /** The directory of its Unix socket (reachable from another network namespace). */
  readonly socketDir: string;
  stop(): Promise<void>;
}

export function binDir(): string {
  const fromEnv = process.env.DIVERGE_PG_BIN;
  if (fromEnv) return fromEnv;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) if (existsSync(join(root, version, "bin", "initdb"))) return join(root, version, "bin");
  throw new Error("no PostgreSQL found: install Debian's postgresql, or set DIVERGE_PG_BIN");
}

/** A loopback port free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function userIds(name: string): { uid: number; gid: number } {
  const uid = Number(spawnSync("id", ["-u", name], { encoding: "utf8" }).stdout.trim());
  const gid = Number(spawnSync("id", ["-g", name], { encoding: "utf8" }).stdout.trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`no user ${name} to run PostgreSQL as`);
  return { uid, gid };
}

export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), "diverge-pg-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? userIds("postgres") : undefined;
  if (owner) {
    chownSync(dir, owner.uid, owner.gid);
    chmodSync(dir, 0o700);
  }
  const spawnOptions = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const init = spawnSync(join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], { ...spawnOptions, encoding: "utf8" });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const server: ChildProcess = spawn(
    join(bin, "postgres"),
    ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=40"],
    { ...spawnOptions, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  server.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      break;
    } catch {
      await client.end().catch(() => {});
      if (server.exitCode !== null || Date.now() > deadline) throw new Error(`PostgreSQL did not start: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return {
    port,
    url,
    socketDir: dir,
    async stop() {
      if (server.exitCode === null) {
        const exited = new Promise((resolve) => server.once("exit", resolve));
        // SIGINT is PostgreSQL's fast shutdown.
        server.kill("SIGINT");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
