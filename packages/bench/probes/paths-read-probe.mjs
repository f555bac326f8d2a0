// A probe (session 13, run by hand: `node packages/bench/probes/<name>.mjs` after building the bench, as root with /dev/fuse): what a sequential read on the paths mount asks of the provider
import { exec } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectProxy, PathsMounts, directoryHandlers } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const execA = promisify(exec);
const base = realpathSync(mkdtempSync(join(tmpdir(), "paths-read-probe-")));
const provider = join(base, "provider"), root = join(base, "root");
mkdirSync(provider); mkdirSync(root);
writeFileSync(join(provider, "f.bin"), Buffer.alloc(12 * 1048576, 7));
const proxy = await startChild(["filesystem", root], process.env.PROF ? { cpuProfile: { dir: process.env.PROF, name: "proxy.cpuprofile" } } : {});
const url = `ws://127.0.0.1:${proxy.ready.port}`;
const mounts = new PathsMounts(url);
const answering = connectProxy(url, { ...mounts.handlers() });
await answering.whenConnected({ timeoutMs: 10000 });
const inner = directoryHandlers(provider);
const calls = [];
const counted = Object.fromEntries(Object.entries(inner).map(([k, f]) => [k, (...a) => { calls.push(k + (k === "read" ? `@${a[1]}+${a[2]}` : "")); return f(...a); }]));
await mounts.mount(["m"], counted);
for (const cmd of [`dd if=m/f.bin of=/dev/null bs=1M status=none`, `dd if=m/f.bin of=/dev/null bs=1M status=none`, `dd if=m/f.bin of=/dev/null bs=1M status=none`].concat(process.env.FIO ? [`fio --name=r --filename=m/f.bin --rw=read --bs=1M --size=12M --ioengine=psync --output-format=terse >/dev/null`] : [])) {
  await execA("sync; echo 3 > /proc/sys/vm/drop_caches");
  calls.length = 0;
  const c0 = process.cpuUsage(); const t0 = performance.now();
  await execA(cmd, { cwd: root });
  const t = performance.now() - t0; const c = process.cpuUsage(c0);
  console.log(cmd.split(" ")[0], `${(12 / (t / 1000)).toFixed(0)} MiB/s, provider ${((c.user + c.system) / 1000 / 12).toFixed(1)} ms/MiB, calls: ${calls.join(" ")}`);
}
await proxy.close(); rmSync(base, { recursive: true, force: true }); process.exit(0);
