// CPU profiles of filesystem::read and /filesystem/read alone: 3 × 256 MiB read (and hashed, as the
// bench's rows do) from a proxy child, the file made in another process so that no write is in the
// profiles. Writes filesystem-read-<transport>-{proxy,provider}.cpuprofile into <dir>:
//   node --cpu-prof --cpu-prof-dir=<dir> --cpu-prof-name=filesystem-read-multiplexed-provider.cpuprofile \
//     packages/bench/dist/read-profile.js multiplexed <dir>
// (and `paths` likewise), then `node packages/bench/dist/profile-summary.js <dir>`.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filesystemPaths, openContainer } from "@diverge/client";
import { startChild } from "./processes.js";

const transport = process.argv[2] === "paths" ? "paths" : "multiplexed";
const dir = process.argv[3] ?? process.cwd();
const MiB = 1 << 20;
const total = 256 * MiB;
const root = mkdtempSync(join(tmpdir(), "diverge-read-profile-"));
execFileSync(process.execPath, ["-e", `require("fs").writeFileSync(${JSON.stringify(join(root, "big.bin"))}, Buffer.alloc(${total}, 7))`]);
const proxy = await startChild(["filesystem", root], { cpuProfile: { dir, name: `filesystem-read-${transport}-proxy.cpuprofile` } });
const url = `ws://127.0.0.1:${proxy.ready.port}`;
const connection = transport === "multiplexed" ? await openContainer(`${url}/`) : undefined;
const paths = filesystemPaths(url);
try {
  for (let round = 0; round < 3; round++) {
    const started = performance.now();
    const hash = createHash("sha256");
    let bytes = 0;
    const reader = (connection ? connection.read(["big.bin"]) : paths.read(["big.bin"])).getReader();
    for (let piece = await reader.read(); !piece.done; piece = await reader.read()) {
      bytes += piece.value.length;
      hash.update(piece.value);
    }
    console.log(`${transport} round ${round}: ${(bytes / 1e6 / ((performance.now() - started) / 1000)).toFixed(0)} MB/s`);
  }
} finally {
  await connection?.close();
  await proxy.close();
  rmSync(root, { recursive: true, force: true });
}
