// A probe (session 14, run by hand: `node packages/bench/probes/ops-probe.mjs [multiplexed|paths] [files]` after building the bench, as root with /dev/fuse): what each step of the small-files and git workloads asks of the provider, per file
import { exec } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, mkdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openContainer, connectProxy, PathsMounts, directoryHandlers } from "@diverge/client";
import { startChild } from "../dist/processes.js";
const execA = promisify(exec);
const transport = process.argv[2] ?? "multiplexed";
const files = Number(process.argv[3] ?? 100);
const base = realpathSync(mkdtempSync(join(tmpdir(), "ops-probe-")));
const provider = join(base, "provider"), root = join(base, "root");
mkdirSync(provider); mkdirSync(root);
// PROF=<dir> writes the proxy's CPU profile there (run the probe itself with --cpu-prof for the provider's); STEPS=create,git picks steps.
const proxy = await startChild(["filesystem", root], process.env.PROF ? { cpuProfile: { dir: process.env.PROF, name: "proxy.cpuprofile" } } : {});
const url = `ws://127.0.0.1:${proxy.ready.port}`;
const calls = new Map();
const inner = directoryHandlers(provider);
// TRACE=1 prints every ask of the run with its arguments (keep the file count small).
const show = (a) => a.map((x) => (x instanceof Uint8Array ? `<${x.length} B>` : typeof x === "object" ? JSON.stringify(x, (_k, v) => (typeof v === "bigint" ? Number(v) : v)) : String(x))).join(" ");
const counted = Object.fromEntries(Object.entries(inner).map(([k, f]) => [k, (...a) => { calls.set(k, (calls.get(k) ?? 0) + 1); if (process.env.TRACE) console.log("  ", k, show(a)); return f(...a); }]));
let close;
if (transport === "paths") {
  const mounts = new PathsMounts(url);
  const answering = connectProxy(url, { ...mounts.handlers() });
  await answering.whenConnected({ timeoutMs: 10000 });
  await mounts.mount(["m"], counted);
  close = async () => answering.close?.();
} else {
  const container = await openContainer(`${url}/`);
  await container.mount(["m"], counted);
  close = () => container.close();
}
const perDir = Math.ceil(files / 10);
const steps = [
  ["lookups", `python3 -c "import os\nfor i in range(${files}):\n  try: os.stat('m/nx%d' % i)\n  except FileNotFoundError: pass\n"`],
  ["create", `python3 -c "import os\nfor d in range(10):\n  os.makedirs('m/small/d%d' % d)\n  for i in range(${perDir}):\n    open('m/small/d%d/f%d' % (d, i), 'wb').write(b'x' * 1024)\n"`],
  ["find", "find m/small > /dev/null"],
  ["tar c", "tar cf /dev/null m/small"],
  ["rm -r", "rm -r m/small"],
  ["git init+add+commit", `mkdir m/g && cd m/g && git init -q && python3 -c "import os\nfor d in range(10):\n  os.makedirs('s%d' % d)\n  for i in range(${perDir}):\n    open('s%d/f%d.txt' % (d, i), 'w').write(('line %d\\n' % (d * 1000 + i)) * 40)\n" && git add -A && git -c user.name=a -c user.email=a@b commit -qm x`],
];
for (const [name, cmd] of steps) {
  if (process.env.STEPS && !process.env.STEPS.split(",").some((s) => name.startsWith(s))) continue;
  calls.clear();
  const c0 = process.cpuUsage(); const p0 = (await proxy.memory(false)).cpu; const t0 = performance.now();
  await execA(cmd, { cwd: root });
  const t = performance.now() - t0; const c = process.cpuUsage(c0); const p = (await proxy.memory(false)).cpu - p0;
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  console.log(`${name}: ${t.toFixed(0)} ms, ${(total / files).toFixed(2)} asks/file, provider ${((c.user + c.system) / 1000 / files).toFixed(2)} ms/file (sys ${(c.system / 1000 / files).toFixed(2)}), proxy ${(p / 1000 / files).toFixed(2)} ms/file;`, [...calls].map(([k, v]) => `${k} ${(v / files).toFixed(2)}`).join(", "));
}
await close(); await proxy.close(); rmSync(base, { recursive: true, force: true }); process.exit(0);
