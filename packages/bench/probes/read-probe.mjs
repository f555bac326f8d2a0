// A probe (session 13, run by hand: `node packages/bench/probes/<name>.mjs` after building the bench, as root with /dev/fuse): a sequential read through the multiplexed mount, provider CPU per MiB
import { exec } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openContainer } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const execA = promisify(exec);
const base = realpathSync(mkdtempSync(join(tmpdir(), "read-probe-")));
const provider = join(base, "provider"), root = join(base, "root");
mkdirSync(provider); mkdirSync(root);
const MiB = 48;
writeFileSync(join(provider, "f.bin"), Buffer.alloc(MiB * 1048576, 7));
const proxy = await startChild(["filesystem", root]);
const container = await openContainer(`ws://127.0.0.1:${proxy.ready.port}/`);
await container.mount(["m"], provider);
for (let round = 0; round < 4; round++) {
  await execA("sync; echo 3 > /proc/sys/vm/drop_caches");
  const c0 = process.cpuUsage(); const p0 = (await proxy.memory(false)).cpu; const t0 = performance.now();
  await execA(`dd if=${join(root, "m", "f.bin")} of=/dev/null bs=1M status=none`);
  const t = performance.now() - t0; const c = process.cpuUsage(c0); const p = (await proxy.memory(false)).cpu - p0;
  console.log(`read ${MiB} MiB: ${(MiB / (t / 1000)).toFixed(0)} MiB/s, provider ${((c.user + c.system) / 1000 / MiB).toFixed(1)} ms/MiB, proxy ${(p / 1000 / MiB).toFixed(1)} ms/MiB`);
}
await container.close(); await proxy.close(); rmSync(base, { recursive: true, force: true }); process.exit(0);
