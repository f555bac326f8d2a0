// The command family hardened (issue 24 §2–§3), through the built CLIs over real sockets: a command runs
// in its own process group, which ends with the program, the exchange or the provider; `diverge
// connect`/`answer` stop on SIGTERM whatever the children do; a command writing faster than the program
// reads holds neither the proxy nor the provider in memory (backpressure end to end); a line longer than
// the message limit is the command's error, never a crash and never `notServed`.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "@diverge/server";
import { commandExec, connectProxy } from "../src/index.js";

const clientCli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const proxyCli = fileURLToPath(new URL("../../server/dist/cli.js", import.meta.url));

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "diverge-command-hardening-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function script(dir: string, body: string): string {
  const file = join(dir, `run-${Math.random().toString(36).slice(2)}.sh`);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves once `check` holds; a hang guard only (it fails the test after `ms`). */
async function until(what: string, check: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await sleep(20);
  }
}

function exited(child: ChildProcess, ms = 60_000): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
    const timer = setTimeout(() => reject(new Error(`pid ${child.pid} did not exit within ${ms} ms`)), ms);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

function own(child: ChildProcess): ChildProcess {
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited(child).catch(() => {});
    }
  });
  return child;
}

/** The proxy's own CLI, in a process of its own (so its memory can be read). */
async function proxyProcess(): Promise<{ child: ChildProcess; port: number; programPort: number }> {
  const child = own(spawn(process.execPath, [proxyCli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--no-secrets-gate", "--quiet", "--root", tempDir()], { stdio: ["ignore", "pipe", "pipe"] }));
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.resume();
  await until("the proxy listening", () => /program http:\/\/127\.0\.0\.1:\d+/.test(out));
  return { child, port: Number(/provider ws:\/\/[^:]+:(\d+)/.exec(out)![1]), programPort: Number(/program http:\/\/127\.0\.0\.1:(\d+)/.exec(out)![1]) };
}

function providerProcess(how: "answer" | "connect", proxyPort: number, executable: string): ChildProcess & { stderrText(): string } {
  const args = how === "answer" ? ["answer"] : ["connect", "--transport", "paths"];
  const child = own(spawn(process.execPath, [clientCli, ...args, "--proxy", `ws://127.0.0.1:${proxyPort}`, "--command-exec", executable, "--vault-dir", tempDir()], { stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return Object.assign(child, { stderrText: () => stderr });
}

/** The program's `POST /command`, read line by line as it pleases; `abort()` is the program leaving. */
function postCommand(programPort: number, body: string) {
  const lines: Record<string, unknown>[] = [];
  let buffered = "";
  let ended = false;
  let response: import("node:http").IncomingMessage | undefined;
  const req = request({ host: "127.0.0.1", port: programPort, path: "/command", method: "POST" }, (res) => {
    response = res;
    res.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      let at: number;
      while ((at = buffered.indexOf("\n")) >= 0) {
        lines.push(JSON.parse(buffered.slice(0, at)) as Record<string, unknown>);
        buffered = buffered.slice(at + 1);
      }
    });
    res.on("end", () => (ended = true));
    res.on("error", () => {});
  });
  req.on("error", () => {});
  req.end(body);
  cleanups.push(() => req.destroy());
  return {
    lines,
    get ended() {
      return ended;
    },
    get response() {
      return response;
    },
    abort: () => req.destroy(),
  };
}

function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match![1]) * 1024;
}

/** A script that says its grandchild's pid, then waits for it: the grandchild is `sleep 1000`. */
function groupScript(dir: string): { executable: string; pidFile: string } {
  const pidFile = join(dir, `grandchild-${Math.random().toString(36).slice(2)}`);
  return { pidFile, executable: script(dir, `sleep 1000 &\necho $! > ${pidFile}\necho "$$ $!"\nwait`) };
}

describe("a command's processes end with their owner", () => {
  it("the program leaving ends the command's whole group (its grandchild too)", { timeout: 120_000 }, async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
    cleanups.push(() => proxy.close());
    const { executable } = groupScript(tempDir());
    const provider = connectProxy(`ws://127.0.0.1:${proxy.port}`, { command: commandExec(executable) }, { minBackoffMs: 10, maxBackoffMs: 50 });
    cleanups.push(() => provider.close());
    const program = postCommand(proxy.programPort, "");
    await until("the command's first line", () => program.lines.length > 0);
    const [shell, grandchild] = Buffer.from(program.lines[0]!.item as string, "base64").toString().split(" ").map(Number) as [number, number];
    expect(alive(shell) && alive(grandchild)).toBe(true);
    program.abort();
    await until("no process of the command's group left", () => !alive(shell) && !alive(grandchild));
  });

  it("the command's own exit ends what it left behind, and the exchange ends done", { timeout: 120_000 }, async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
    cleanups.push(() => proxy.close());
    const dir = tempDir();
    const pidFile = join(dir, "left");
    const executable = script(dir, `sleep 1000 &\necho $! > ${pidFile}\necho started`);
    const provider = connectProxy(`ws://127.0.0.1:${proxy.port}`, { command: commandExec(executable) }, { minBackoffMs: 10, maxBackoffMs: 50 });
    cleanups.push(() => provider.close());
    const program = postCommand(proxy.programPort, "");
    await until("the command's end", () => program.ended);
    expect(program.lines).toEqual([{ item: Buffer.from("started").toString("base64") }, { end: "done" }]);
    const left = Number(readFileSync(pidFile, "utf8"));
    await until("the background sleep gone", () => !alive(left));
  });

  for (const how of ["connect", "answer"] as const) {
    it(`SIGTERM stops diverge ${how} promptly with a command running, and its group ends`, { timeout: 120_000 }, async () => {
      const proxy = await proxyProcess();
      const dir = tempDir();
      const { executable } = groupScript(dir);
      const provider = providerProcess(how, proxy.port, executable);
      let program = postCommand(proxy.programPort, "");
      // Until the provider holds /requests, a command is not served: ask again.
      await until("the command running", () => {
        if (program.ended && program.lines.length > 0 && program.lines[0]!.end === "notServed") program = postCommand(proxy.programPort, "");
        return program.lines.length > 0 && program.lines[0]!.item !== undefined;
      }, 120_000);
      const [shell, grandchild] = Buffer.from(program.lines[0]!.item as string, "base64").toString().split(" ").map(Number) as [number, number];
      const started = Date.now();
      provider.kill("SIGTERM");
      const code = await exited(provider, 10_000);
      const took = Date.now() - started;
      expect(code, provider.stderrText()).toBe(0);
      console.log(`diverge ${how}: exited ${took} ms after SIGTERM`);
      await until("no process of the command's group left", () => !alive(shell) && !alive(grandchild));
    });
  }
});

describe("a command's output is bounded", () => {
  it("a command writing faster than the program reads grows neither the proxy nor the provider", { timeout: 120_000 }, async () => {
    const proxy = await proxyProcess();
    const dir = tempDir();
    const executable = script(dir, `echo $$\nexec yes ${"y".repeat(200)}`);
    const provider = providerProcess("answer", proxy.port, executable);
    let program = postCommand(proxy.programPort, "");
    await until("the command running", () => {
      if (program.ended && program.lines[0]?.end === "notServed") program = postCommand(proxy.programPort, "");
      return program.lines.length > 1 && program.lines[0]!.item !== undefined;
    }, 120_000);
    const yes = Number(Buffer.from(program.lines.shift()!.item as string, "base64").toString());
    // The program stops reading.
    program.response!.pause();
    await sleep(500);
    const before = { proxy: rssBytes(proxy.child.pid!), provider: rssBytes(provider.pid!) };
    await sleep(6000);
    const after = { proxy: rssBytes(proxy.child.pid!), provider: rssBytes(provider.pid!) };
    const mb = (n: number) => `${(n / 1048576).toFixed(1)} MB`;
    console.log(`not reading for 6 s: proxy ${mb(before.proxy)} → ${mb(after.proxy)}, provider ${mb(before.provider)} → ${mb(after.provider)}`);
    expect(after.proxy - before.proxy).toBeLessThan(64 * 1048576);
    expect(after.provider - before.provider).toBeLessThan(64 * 1048576);
    // It reads again: the items still come, in order, nothing lost.
    const seen = program.lines.length;
    program.response!.resume();
    await until("more items", () => program.lines.length > seen + 1000);
    expect(program.lines.slice(0, seen + 1000).every((line) => line.item === Buffer.from("y".repeat(200)).toString("base64"))).toBe(true);
    // It stops reading again and leaves: the command ends (the paused path still closes).
    program.response!.pause();
    await sleep(500);
    expect(alive(yes)).toBe(true);
    program.abort();
    await until("the command ended", () => !alive(yes));
    expect(provider.exitCode).toBe(null);
  });

  it("an endless line (cat /dev/zero) is the command's error; the provider lives on and answers the next", { timeout: 120_000 }, async () => {
    const proxy = await proxyProcess();
    const dir = tempDir();
    const flag = join(dir, "second");
    const executable = script(dir, `if [ -e ${flag} ]; then echo fine; exit 0; fi\ntouch ${flag}\nexec cat /dev/zero`);
    const provider = providerProcess("answer", proxy.port, executable);
    let program = postCommand(proxy.programPort, "");
    await until("the command's end", () => {
      if (program.ended && program.lines[0]?.end === "notServed" && !existsSync(flag)) program = postCommand(proxy.programPort, "");
      return program.ended && (program.lines[0]?.end !== "notServed" || existsSync(flag));
    }, 120_000);
    expect(program.lines).toEqual([{ end: "error", error: { refused: "lineTooLong", maxLineBytes: 16 * 1024 * 1024 - 1 } }]);
    expect(provider.exitCode).toBe(null);
    const next = postCommand(proxy.programPort, "");
    await until("the next command's end", () => next.ended);
    expect(next.lines).toEqual([{ item: Buffer.from("fine").toString("base64") }, { end: "done" }]);
  });

  it("a first line over the message limit is an error, never notServed; lines are bytes", { timeout: 120_000 }, async () => {
    const limit = 1024 * 1024;
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, maxMessageBytes: limit, log: () => {} });
    cleanups.push(() => proxy.close());
    const dir = tempDir();
    const executable = script(dir, `printf '\\377\\376\\r\\n'\nhead -c ${limit - 1} /dev/zero | tr '\\0' a; echo\nhead -c ${2 * limit} /dev/zero | tr '\\0' b; echo`);
    const provider = connectProxy(`ws://127.0.0.1:${proxy.port}`, { command: commandExec(executable) }, { minBackoffMs: 10, maxBackoffMs: 50, maxMessageBytes: limit });
    cleanups.push(() => provider.close());
    await provider.whenConnected();
    const program = postCommand(proxy.programPort, "");
    await until("the command's end", () => program.ended);
    expect(program.lines.map((line) => (line.item !== undefined ? Buffer.from(line.item as string, "base64").length : line))).toEqual([
      2,
      limit - 1,
      { end: "error", error: { refused: "lineTooLong", maxLineBytes: limit - 1 } },
    ]);
    expect(Buffer.from(program.lines[0]!.item as string, "base64")).toEqual(Buffer.from([0xff, 0xfe]));
    // The first line over the limit: the command ran, so it is its error, never notServed.
    await provider.close();
    const oversized = script(dir, `head -c ${2 * limit} /dev/zero; echo`);
    const again = connectProxy(`ws://127.0.0.1:${proxy.port}`, { command: commandExec(oversized) }, { minBackoffMs: 10, maxBackoffMs: 50, maxMessageBytes: limit });
    cleanups.push(() => again.close());
    await again.whenConnected();
    const second = postCommand(proxy.programPort, "");
    await until("the second command's end", () => second.ended);
    expect(second.lines).toEqual([{ end: "error", error: { refused: "lineTooLong", maxLineBytes: limit - 1 } }]);
  });

  it("a handler's item over the limit is the command's error, and a handler failing before its first item is lost: never notServed", { timeout: 120_000 }, async () => {
    const limit = 64 * 1024;
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, maxMessageBytes: limit, log: () => {} });
    cleanups.push(() => proxy.close());
    const provider = connectProxy(
      `ws://127.0.0.1:${proxy.port}`,
      {
        command: async function* ({ command }) {
          if (Buffer.from(command).toString() === "throw") throw new Error("/provider/secret/path vanished");
          yield { variant: "Item", item: new Uint8Array(limit) };
        },
      },
      { minBackoffMs: 10, maxBackoffMs: 50, maxMessageBytes: limit },
    );
    cleanups.push(() => provider.close());
    await provider.whenConnected();
    const big = postCommand(proxy.programPort, "big");
    await until("the command's end", () => big.ended);
    expect(big.lines).toEqual([{ end: "error", error: { refused: "itemTooLarge", maxItemBytes: limit - 1 } }]);
    const thrown = postCommand(proxy.programPort, "throw");
    await until("the command's end", () => thrown.ended);
    expect(thrown.lines).toEqual([{ end: "lost" }]);
  });
});
