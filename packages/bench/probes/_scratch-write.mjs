import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { directoryHandlers, openContainer } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const run = promisify(execFile);
const base = realpathSync(mkdtempSync(join(tmpdir(), "scratch-")));
const cpuOf = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return ((Number(f[11]) + Number(f[12])) * 1e6) / 100; };
const provider = join(base, "p"), root = join(base, "r"); mkdirSync(provider); mkdirSync(root);
const proxy = await startChild(["filesystem", root], process.env.PROF ? { cpuProfile: { dir: "/tmp/wsx/prof", name: "proxy.cpuprofile" } } : {});
const url = `ws://127.0.0.1:${proxy.ready.port}`;
const container = await openContainer(`${url}/`);
await container.mount(["m"], directoryHandlers(provider));
const dir = join(root, "m");
const bs = process.env.BS ?? "1M";
for (let rep = 0; rep < Number(process.env.REPS ?? 3); rep++) {
  const c0 = cpuOf(proxy.pid), p0 = cpuOf(process.pid);
  const r = await run("fio", ["--name=bench", `--filename=${dir}/fio.bin`, "--rw=write", `--bs=${bs}`, "--size=12M", "--ioengine=psync", "--output-format=json", "--end_fsync=1", "--create_on_open=1"]);
  const job = JSON.parse(r.stdout.slice(r.stdout.indexOf("{"))).jobs[0];
  console.log("write", (job.write.bw_bytes / 2 ** 20).toFixed(1), "MiB/s; CPU per MiB proxy", ((cpuOf(proxy.pid) - c0) / 12000).toFixed(2), "ms, provider", ((cpuOf(process.pid) - p0) / 12000).toFixed(2), "ms");
}
for (const t of (await import("node:fs")).readdirSync("/proc/self/task")) { const st = readFileSync(`/proc/self/task/${t}/stat`, "utf8"); const name = readFileSync(`/proc/self/task/${t}/comm`, "utf8").trim(); const f = st.split(") ")[1].split(" "); console.log(name, "utime", f[11], "stime", f[12]); }
await container.close();
await proxy.close();
rmSync(base, { recursive: true, force: true });
process.exit(0);
