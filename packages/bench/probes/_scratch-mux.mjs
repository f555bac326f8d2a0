import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { directoryHandlers, openContainer } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const run = promisify(execFile);
const N = Number(process.argv[2] ?? 5000);
const DEPTH = Number(process.env.DEPTH ?? 0);
const base = realpathSync(mkdtempSync(join(tmpdir(), "scratch-")));
const cpuOf = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return ((Number(f[11]) + Number(f[12])) * 1e6) / 100; };
const provider = join(base, "p"), root = join(base, "r"); mkdirSync(provider); mkdirSync(root);
let sub = ""; for (let i = 0; i < DEPTH; i++) { sub += `/d${i}`; mkdirSync(provider + sub); }
const proxy = await startChild(["filesystem", root], process.env.PROF ? { cpuProfile: { dir: "/tmp/wsx/prof", name: "proxy.cpuprofile" } } : {});
const url = `ws://127.0.0.1:${proxy.ready.port}`;
const container = await openContainer(`${url}/`);
await container.mount(["m"], directoryHandlers(provider));
const dir = join(root, "m") + sub;
for (const rep of (process.env.REPS ? Array.from({ length: Number(process.env.REPS) }, (_, i) => i) : [0, 1, 2, 3])) {
  if (process.env.SLEEP && rep === 5) await new Promise((r) => setTimeout(r, Number(process.env.SLEEP)));
  const c0 = cpuOf(proxy.pid), p0 = cpuOf(process.pid), t0 = performance.now();
  await run("python3", ["-c", `import os\nfor i in range(${N}):\n  try: os.stat('${dir}/nx${rep}_%d' % i)\n  except FileNotFoundError: pass\n`]);
  console.log("mux depth", DEPTH, (((performance.now() - t0) * 1000) / N).toFixed(0), "µs/op; proxy", ((cpuOf(proxy.pid) - c0) / N).toFixed(0), "provider", ((cpuOf(process.pid) - p0) / N).toFixed(0));
}
await container.close();
await proxy.close();
rmSync(base, { recursive: true, force: true });
process.exit(0);
