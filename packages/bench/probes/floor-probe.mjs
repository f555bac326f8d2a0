// A probe (session 15, run by hand: `node packages/bench/probes/floor-probe.mjs [lookups]` after building the bench, as root with /dev/fuse):
// the floor under one FUSE operation. The same client (python3 stat()ing names that do not exist, one
// lookup each, never cached) against: the FUSE binding alone (answered in this process at once),
// sshfs over a loopback sshd, and the proxy's mounts on both transports; beside them, the round trip
// of one small message between two bare Node processes (a TCP socket, a WebSocket). Each with its
// wall time per operation and the CPU per operation of each process this run can meter.
import { execFile, fork, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync, chmodSync, copyFileSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { WebSocket, WebSocketServer } from "ws";
import { connectProxy, directoryHandlers, openContainer, PathsMounts } from "@diverge/client";
import { startChild } from "../dist/processes.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 5000);
const base = realpathSync(mkdtempSync(join(tmpdir(), "floor-probe-")));
const cpuOf = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1e6) / 100; // utime + stime, in µs (USER_HZ 100)
};
const rows = [];
const row = (what, us, cpu) => rows.push([what, us.toFixed(0), cpu]);

/**
 * python3 stat()ing N missing names under `dir`: the wall time per lookup, in µs. A first pass of
 * other names is not measured: a fresh Node process takes its first ~4,000 asks (~3 s on two cores)
 * to compile its hot code, at about twice the cost of each later one.
 */
async function lookups(dir, meters = []) {
  const pass = (prefix) => run("python3", ["-c", `import os\nfor i in range(${N}):\n  try: os.stat('${dir}/${prefix}%d' % i)\n  except FileNotFoundError: pass\n`]);
  await pass("warm");
  const before = meters.map((m) => m());
  const t0 = performance.now();
  await pass("nx");
  const us = ((performance.now() - t0) * 1000) / N;
  return { us, cpu: meters.map((m, i) => (m() - before[i]) / N) };
}

// The client alone, on a local directory: what python itself costs per lookup.
mkdirSync(join(base, "local"));
const local = await lookups(join(base, "local"));
row("python3 stat() of a missing name, local directory (the client's own cost)", local.us, "—");

// The FUSE binding alone: getattr answered in this process at once.
{
  // The binding the proxy loads: @diverge/server's own dependency.
  const Fuse = createRequire(require.resolve("@diverge/server"))("@diverge/fuse-native");
  const at = join(base, "fuse-alone");
  mkdirSync(at);
  const now = new Date();
  const rootStat = { mode: 0o40755, uid: 0, gid: 0, size: 4096, nlink: 2, atime: now, mtime: now, ctime: now };
  const fuse = new Fuse(at, { getattr: (p, cb) => (p === "/" ? cb(0, rootStat) : cb(Fuse.ENOENT)) }, { force: true, defaultPermissions: true, allowOther: true, timeout: false });
  await new Promise((resolve, reject) => fuse.mount((error) => (error ? reject(error) : resolve())));
  const r = await lookups(at, [() => cpuOf(process.pid)]);
  row(`FUSE binding alone (libfuse ${Fuse.LIBFUSE_MAJOR}), answered at once in one Node process`, r.us, `that process ${r.cpu[0].toFixed(0)} µs`);
  await new Promise((resolve) => fuse.unmount(resolve));
}

// One small message's round trip between two bare Node processes.
for (const kind of ["tcp", "ws"]) {
  const child = fork(new URL(import.meta.url).pathname.replace(/floor-probe\.mjs$/, "floor-echo.mjs"), [kind]);
  const port = await new Promise((resolve) => child.once("message", resolve));
  const message = Buffer.alloc(40, 1);
  let next;
  let send;
  let close;
  if (kind === "ws") {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((resolve) => ws.once("open", resolve));
    ws.on("message", () => next());
    send = () => ws.send(message);
    close = () => ws.close();
  } else {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.setNoDelay(true);
    socket.on("data", () => next());
    send = () => socket.write(message);
    close = () => socket.destroy();
  }
  const once = () => new Promise((resolve) => ((next = resolve), send()));
  for (let i = 0; i < 500; i++) await once();
  const c0 = cpuOf(process.pid), s0 = cpuOf(child.pid), t0 = performance.now();
  for (let i = 0; i < N; i++) await once();
  const us = ((performance.now() - t0) * 1000) / N;
  row(`a 40-byte message and its echo between two Node processes (${kind === "ws" ? "WebSocket, ws" : "TCP, net"})`, us, `sender ${((cpuOf(process.pid) - c0) / N).toFixed(0)} µs, echo ${((cpuOf(child.pid) - s0) / N).toFixed(0)} µs`);
  close();
  child.kill();
}

// A WebSocket opened for one message and its echo, then closed (what the paths transport pays per answer).
{
  const child = fork(new URL(import.meta.url).pathname.replace(/floor-probe\.mjs$/, "floor-echo.mjs"), ["ws"]);
  const port = await new Promise((resolve) => child.once("message", resolve));
  const message = Buffer.alloc(40, 1);
  const once = () =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      ws.once("open", () => ws.send(message));
      ws.once("message", () => ws.close());
      ws.once("close", resolve);
      ws.once("error", reject);
    });
  const rounds = Math.min(N, 2000);
  for (let i = 0; i < 100; i++) await once();
  const c0 = cpuOf(process.pid), s0 = cpuOf(child.pid), t0 = performance.now();
  for (let i = 0; i < rounds; i++) await once();
  const us = ((performance.now() - t0) * 1000) / rounds;
  row("a WebSocket opened, a 40-byte message and its echo, closed, between two Node processes (ws)", us, `opener ${((cpuOf(process.pid) - c0) / rounds).toFixed(0)} µs, echo ${((cpuOf(child.pid) - s0) / rounds).toFixed(0)} µs`);
  child.kill();
}

// sshfs over a loopback sshd (as case 13 mounts it).
if (["/usr/sbin/sshd", "/usr/bin/sshfs", "/usr/bin/ssh-keygen"].every(existsSync)) {
  const ssh = join(base, "ssh");
  mkdirSync(ssh, { mode: 0o700 });
  for (const key of ["host", "user"]) await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(ssh, key)]);
  copyFileSync(join(ssh, "user.pub"), join(ssh, "authorized_keys"));
  chmodSync(join(ssh, "authorized_keys"), 0o600);
  const port = 20000 + ((process.pid + 7) % 20000);
  writeFileSync(join(ssh, "sshd_config"), [`Port ${port}`, "ListenAddress 127.0.0.1", `HostKey ${join(ssh, "host")}`, `AuthorizedKeysFile ${join(ssh, "authorized_keys")}`, "PermitRootLogin yes", "PasswordAuthentication no", "UsePAM no", "StrictModes no", `PidFile ${join(ssh, "pid")}`, "Subsystem sftp internal-sftp"].join("\n") + "\n");
  mkdirSync("/run/sshd", { recursive: true });
  const sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(ssh, "sshd_config")], { stdio: ["ignore", "ignore", "pipe"] });
  await new Promise((resolve) => sshd.stderr.on("data", (d) => String(d).includes("listening") && resolve()));
  const served = join(base, "sshfs-served"), at = join(base, "sshfs");
  mkdirSync(served);
  mkdirSync(at);
  await run("sshfs", ["-o", `IdentityFile=${join(ssh, "user")},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,port=${port},LogLevel=ERROR`, `root@127.0.0.1:${served}`, at]);
  const sshfsPid = Number((await run("pgrep", ["-n", "-x", "sshfs"])).stdout.trim());
  const r = await lookups(at, [() => cpuOf(sshfsPid)]);
  row("sshfs over a loopback sshd (internal-sftp)", r.us, `sshfs ${r.cpu[0].toFixed(0)} µs (ssh and sshd not metered here)`);
  await run("fusermount", ["-u", at]);
  sshd.kill();
} else row("sshfs: not measured (openssh-server and sshfs missing)", NaN, "—");

// The proxy's mounts: one stat ask per lookup, answered by the directory backend.
for (const transport of ["multiplexed", "paths"]) {
  const provider = join(base, `${transport}-provider`), root = join(base, `${transport}-root`);
  mkdirSync(provider);
  mkdirSync(root);
  const proxy = await startChild(["filesystem", root]);
  const url = `ws://127.0.0.1:${proxy.ready.port}`;
  let close;
  if (transport === "paths") {
    const mounts = new PathsMounts(url);
    const answering = connectProxy(url, { ...mounts.handlers() });
    await answering.whenConnected({ timeoutMs: 10000 });
    await mounts.mount(["m"], directoryHandlers(provider));
    close = async () => answering.close?.();
  } else {
    const container = await openContainer(`${url}/`);
    await container.mount(["m"], directoryHandlers(provider));
    close = () => container.close();
  }
  const r = await lookups(join(root, "m"), [() => cpuOf(proxy.pid), () => cpuOf(process.pid)]);
  row(`the proxy's ${transport === "paths" ? "/fuse/mount (paths)" : "fuse::mount (multiplexed)"}, the directory backend answering`, r.us, `proxy ${r.cpu[0].toFixed(0)} µs, provider ${r.cpu[1].toFixed(0)} µs`);
  await close();
  await proxy.close();
}

console.log(`${N} lookups each (python3 os.stat of a name that is not there), ${new Date().toISOString()}, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}\n`);
console.log("| path | µs per lookup | CPU per lookup |\n| --- | ---: | --- |");
for (const [what, us, cpu] of rows) console.log(`| ${what} | ${us} | ${cpu} |`);
rmSync(base, { recursive: true, force: true });
process.exit(0);
