// A probe (session 13, run by hand: `node packages/bench/probes/<name>.mjs` after building the bench, as root with /dev/fuse): the paths FUSE proxy's RSS rise for a small and a large file
import { exec } from "node:child_process";
import { promisify } from "node:util";
const execA = promisify(exec);
import { mkdtempSync, mkdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectProxy, PathsMounts, openContainer } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const transport = process.argv[2] ?? "paths";
const sizes = (process.argv[3] ?? "1,15").split(",").map(Number);
const base = realpathSync(mkdtempSync(join(tmpdir(), "rss-probe-")));
const provider = join(base, "provider"), root = join(base, "root");
mkdirSync(provider); mkdirSync(root);
console.log("start");
const proxy = await startChild(["filesystem", root]);
const url = `ws://127.0.0.1:${proxy.ready.port}`;
let container, answering;
if (transport === "paths") {
  const mounts = new PathsMounts(url);
  answering = connectProxy(url, { ...mounts.handlers() });
  await answering.whenConnected({ timeoutMs: 10000 });
  await mounts.mount(["m"], provider);
} else { container = await openContainer(`${url}/`); await container.mount(["m"], provider); }
console.log("mounted");
const dir = join(root, "m");
const measure = async (what, cmd) => {
  const before = (await proxy.memory()).rss;
  let peak = before, done = false;
  const sampler = (async () => { while (!done) { peak = Math.max(peak, (await proxy.memory(false)).rss); await new Promise((r) => setTimeout(r, 20)); } })();
  await execA(cmd, { cwd: dir, shell: "/bin/bash" });
  done = true; await sampler;
  return `${what} +${((peak - before) / 1048576).toFixed(1)}`;
};
for (let round = 0; round < 3; round++) for (const mib of sizes) {
  const w = process.env.SPLIT ? await measure("write", `head -c ${mib * 1048576} /dev/zero | dd of=rss.bin bs=65536 iflag=fullblock conv=fsync status=none`) : "";
  const r = process.env.SPLIT ? await measure("read", `cat rss.bin > /dev/null`) : await measure("both", `head -c ${mib * 1048576} /dev/zero | dd of=rss.bin bs=65536 iflag=fullblock conv=fsync status=none && cat rss.bin > /dev/null`);
  await execA("rm rss.bin", { cwd: dir });
  console.log(`${transport} ${mib} MiB: ${w} ${r}`);
}
await container?.close(); await proxy.close(); rmSync(base, { recursive: true, force: true });
process.exit(0);
