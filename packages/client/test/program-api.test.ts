// The program-facing vault and command API (issue 15 §3–§4) through a real proxy and a real provider:
// HTTP on the program port, the generated asks on /requests, the provider's typed handlers, and for
// the command a real executable run by `commandExec`.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeRequestsAsk } from "@diverge/codec";
import { startProxy, type RunningProxy } from "@diverge/server";
import { commandExec, connectProxy, type ProxyConnection, type ProxyHandlers } from "../src/index.js";

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of running.splice(0).reverse()) await item.close();
});

async function proxy(): Promise<RunningProxy> {
  const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
  running.push(p);
  return p;
}

function connect(p: RunningProxy, handlers: ProxyHandlers): ProxyConnection {
  const connection = connectProxy(`ws://127.0.0.1:${p.port}`, handlers, { minBackoffMs: 10, maxBackoffMs: 50 });
  running.push(connection);
  return connection;
}

const api = (p: RunningProxy, path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${p.programPort}${path}`, init);

/** A store kept by the provider's handlers, as any provider may keep one. */
function storeHandlers(): ProxyHandlers {
  const store = new Map<string, Uint8Array>();
  return {
    vaultGet: ({ key }) => {
      if (key === "broken") return { variant: "Error", message: "the store is down" };
      const value = store.get(key);
      return value ? { variant: "Present", value } : { variant: "Missing" };
    },
    vaultSet: ({ key, value }) => (store.set(key, value.slice()), { variant: "Done" }),
    vaultDelete: ({ key }) => (store.delete(key), { variant: "Done" }),
    vaultLock: ({ ttl }) => (ttl === 0 ? { variant: "Error", message: "ttl is zero" } : { variant: "Done" }),
  };
}

describe("the vault API on the program port", () => {
  it("answers each call with the status of the contract", async () => {
    const p = await proxy();
    connect(p, storeHandlers());
    const missing = await api(p, "/vault/k%C3%A9y");
    expect(missing.status).toBe(404);
    expect((await api(p, "/vault/k%C3%A9y", { method: "PUT", body: "v\u00e9" })).status).toBe(204);
    const got = await api(p, "/vault/k%C3%A9y");
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("application/octet-stream");
    expect(Buffer.from(await got.arrayBuffer()).toString("utf8")).toBe("v\u00e9");
    expect((await api(p, "/vault/empty", { method: "PUT", body: "" })).status).toBe(204);
    const empty = await api(p, "/vault/empty");
    expect(empty.status).toBe(200);
    expect((await empty.arrayBuffer()).byteLength).toBe(0);
    const broken = await api(p, "/vault/broken");
    expect(broken.status).toBe(502);
    expect(await broken.text()).toBe("the store is down");
    expect((await api(p, "/vault/k%C3%A9y", { method: "DELETE" })).status).toBe(204);
    expect((await api(p, "/vault/k%C3%A9y")).status).toBe(404);
    expect((await api(p, "/vault/k/lock?ttl=30", { method: "POST" })).status).toBe(204);
    // A lock of zero seconds is refused before asking (the lock's semantics refuse it anyway).
    const zero = await api(p, "/vault/k/lock?ttl=0", { method: "POST" });
    expect(zero.status).toBe(400);
    expect(await zero.text()).toBe("ttl must be a number of seconds from 1 to 4294967295\n");
    // No unlock handler: not served.
    expect((await api(p, "/vault/k/unlock", { method: "POST" })).status).toBe(503);
  });

  it("refuses with 400 what cannot be asked, before asking", async () => {
    const p = await proxy();
    const asked: string[] = [];
    connect(p, { ...storeHandlers(), vaultLock: ({ key }) => (asked.push(key), { variant: "Done" }) });
    expect((await api(p, "/vault/%FF")).status).toBe(400);
    expect((await api(p, "/vault/k/lock", { method: "POST" })).status).toBe(400);
    expect((await api(p, "/vault/k/lock?ttl=-1", { method: "POST" })).status).toBe(400);
    expect((await api(p, "/vault/k/lock?ttl=4294967296", { method: "POST" })).status).toBe(400);
    expect((await api(p, `/vault/${"k".repeat(65_536)}`, { method: "PUT", body: "v" })).status).toBe(400);
    expect(asked).toEqual([]);
    expect((await api(p, "/vault/k/lock?ttl=4294967295", { method: "POST" })).status).toBe(204);
    expect(asked).toEqual(["k"]);
  });

  it("refuses a value or a command over the message limit with 400, and asks nothing", async () => {
    const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, maxMessageBytes: 1024, log: () => {} });
    running.push(p);
    const asked: string[] = [];
    connect(p, { vaultSet: ({ key }) => (asked.push(key), { variant: "Done" }), command: async function* () { asked.push("command"); } });
    expect((await api(p, "/vault/big", { method: "PUT", body: "x".repeat(4096) })).status).toBe(400);
    expect((await api(p, "/command", { method: "POST", body: "x".repeat(4096) })).status).toBe(400);
    // A body under the limit whose ask (header and key with it) is still over one message: 400 too.
    const tooLong = await api(p, `/vault/${"k".repeat(100)}`, { method: "PUT", body: "x".repeat(1000) });
    expect(tooLong.status).toBe(400);
    expect(await tooLong.text()).toContain("more than one message may carry (1024)");
    expect((await api(p, "/vault/k", { method: "PUT", body: "x".repeat(100) })).status).toBe(204);
    expect(asked).toEqual(["k"]);
  });

  it("a malformed answer is 502 with the decoder's text; a path ended abruptly is 503 and never asked again", async () => {
    const p = await proxy();
    const kinds: string[] = [];
    const requests = new WebSocket(`ws://127.0.0.1:${p.port}/requests`);
    requests.on("error", () => {});
    running.push({ close: async () => void requests.terminate() });
    requests.on("message", (data) => {
      const ask = decodeRequestsAsk(new Uint8Array(data as Buffer));
      kinds.push(ask.variant);
      const path = new WebSocket(`ws://127.0.0.1:${p.port}/vault/${ask.variant === "VaultGet" ? "get" : "delete"}/${ask.channel}`);
      path.on("error", () => {});
      path.once("open", () => {
        if (ask.variant === "VaultGet") {
          path.send(new Uint8Array([7]));
          path.close();
        } else path.terminate();
      });
    });
    await new Promise((resolve) => requests.once("open", resolve));
    const get = await api(p, "/vault/k");
    expect(get.status).toBe(502);
    expect(await get.text()).toContain("unknown vault response kind 7");
    const del = await api(p, "/vault/k", { method: "DELETE" });
    expect(del.status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(kinds).toEqual(["VaultGet", "VaultDelete"]);
  });
});

/**
 * A provider by hand on /requests that answers every ask with `answer(kind)`'s messages on its path,
 * then a clean close (or an abrupt end for `"abrupt"`).
 */
async function rawProvider(p: RunningProxy, answer: (kind: string) => Uint8Array[] | "abrupt"): Promise<string[]> {
  const kinds: string[] = [];
  const requests = new WebSocket(`ws://127.0.0.1:${p.port}/requests`);
  requests.on("error", () => {});
  running.push({ close: async () => void requests.terminate() });
  requests.on("message", (data) => {
    const ask = decodeRequestsAsk(new Uint8Array(data as Buffer));
    kinds.push(ask.variant);
    const segment = ask.variant.replace(/^Vault/, "vault/").replace(/^Command$/, "command").toLowerCase();
    const path = new WebSocket(`ws://127.0.0.1:${p.port}/${segment}/${ask.channel}`);
    path.on("error", () => {});
    path.once("open", () => {
      const messages = answer(ask.variant);
      if (messages === "abrupt") return path.terminate();
      for (const message of messages) path.send(message);
      path.close();
    });
  });
  await new Promise((resolve) => requests.once("open", resolve));
  return kinds;
}

describe("bad answers from a provider get the documented status, never a crash or a hang", () => {
  it("a malformed vault ack is 502 with the decoder's exact text, for set, delete, lock and unlock", async () => {
    const p = await proxy();
    const answers: Record<string, Uint8Array[]> = {
      VaultSet: [new Uint8Array([])],
      VaultDelete: [new Uint8Array([2])],
      VaultLock: [new Uint8Array([1, 0xff, 0xfe])],
      VaultUnlock: [new Uint8Array([9, 1, 2])],
    };
    const kinds = await rawProvider(p, (kind) => answers[kind]!);
    const calls: [string, string, RequestInit, string][] = [
      ["VaultSet", "/vault/k", { method: "PUT", body: "v" }, "vault response is empty"],
      ["VaultDelete", "/vault/k", { method: "DELETE" }, "unknown vault response kind 2"],
      ["VaultLock", "/vault/k/lock?ttl=5", { method: "POST" }, "vault error message is not utf-8"],
      ["VaultUnlock", "/vault/k/unlock", { method: "POST" }, "unknown vault response kind 9"],
    ];
    for (const [, path, init, text] of calls) {
      const response = await api(p, path, init);
      expect(response.status, path).toBe(502);
      expect(await response.text()).toBe(`the provider's answer could not be read: ${text}\n`);
    }
    // Each was asked once, never again.
    expect(kinds).toEqual(calls.map(([kind]) => kind));
  });

  it("a vault get answer that is empty, or whose message is not UTF-8, is 502 with the decoder's text", async () => {
    const p = await proxy();
    let next: Uint8Array = new Uint8Array([]);
    await rawProvider(p, () => [next]);
    expect(await (await api(p, "/vault/k")).text()).toBe("the provider's answer could not be read: vault response is empty\n");
    next = new Uint8Array([2, 0xc3]);
    const bad = await api(p, "/vault/k");
    expect(bad.status).toBe(502);
    expect(await bad.text()).toBe("the provider's answer could not be read: vault error message is not utf-8\n");
  });

  it("a malformed command response ends the NDJSON with lost after the items before it; the proxy logs the decoder's text", async () => {
    const logged: string[] = [];
    const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: (line) => logged.push(line) });
    running.push(p);
    const item = (text: string) => new Uint8Array([0, ...Buffer.from(text)]);
    const cases: [Uint8Array, string][] = [
      [new Uint8Array([]), "command response is empty"],
      [new Uint8Array([2]), "unknown command response tag 2"],
      [new Uint8Array([1, ...Buffer.from("{not json")]), "command error did not parse"],
    ];
    let next = 0;
    const kinds = await rawProvider(p, () => [item("before"), cases[next]![0], item("after")]);
    for (const [, text] of cases) {
      const response = await api(p, "/command", { method: "POST", body: "x" });
      expect(response.status).toBe(200);
      expect(await ndjson(response)).toEqual([{ item: Buffer.from("before").toString("base64") }, { end: "lost" }]);
      expect(logged.some((line) => line.includes(text)), `${text} in ${JSON.stringify(logged)}`).toBe(true);
      next++;
    }
    // Never run again.
    expect(kinds).toEqual(["Command", "Command", "Command"]);
  });

  it("an answer over the message limit: a vault get is 502 saying so, a command ends lost", async () => {
    const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, maxMessageBytes: 1024, log: () => {} });
    running.push(p);
    const big = new Uint8Array(4096);
    await rawProvider(p, (kind) => (kind === "VaultGet" ? [new Uint8Array([0, ...big])] : [new Uint8Array([0, ...big])]));
    const get = await api(p, "/vault/k");
    expect(get.status).toBe(502);
    expect(await get.text()).toBe("the provider's answer is larger than 1024 bytes\n");
    expect(await ndjson(await api(p, "/command", { method: "POST", body: "x" }))).toEqual([{ end: "lost" }]);
  });
});

/** A real executable: upper-cases each line of its stdin; `fail` on a line exits 3 after a word on stderr. */
function executable(): string {
  const dir = mkdtempSync(join(tmpdir(), "diverge-command-"));
  const file = join(dir, "run-command.mjs");
  writeFileSync(
    file,
    [
      `#!${process.execPath}`,
      `let input = "";`,
      `process.stdin.on("data", (c) => (input += c));`,
      `process.stdin.on("end", () => {`,
      `  for (const line of input.split("\\n").filter(Boolean)) {`,
      `    if (line === "fail") { process.stderr.write("x".repeat(5000) + "it failed"); process.exit(3); }`,
      `    if (line === "hang") { process.stdout.write("waiting\\n"); setInterval(() => {}, 1000); return; }`,
      `    process.stdout.write(line.toUpperCase() + "\\n");`,
      `  }`,
      `});`,
      "",
    ].join("\n"),
  );
  chmodSync(file, 0o755);
  return file;
}

async function ndjson(response: Response): Promise<unknown[]> {
  return (await response.text())
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

describe("the command API on the program port", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");

  it("streams each stdout line as an item, then done; a failing exit is the error with the stderr tail", async () => {
    const p = await proxy();
    connect(p, { command: commandExec(executable()) });
    const ok = await api(p, "/command", { method: "POST", body: "one\ntwo\n" });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toBe("application/x-ndjson");
    expect(await ndjson(ok)).toEqual([{ item: b64("ONE") }, { item: b64("TWO") }, { end: "done" }]);
    const failed = await ndjson(await api(p, "/command", { method: "POST", body: "a\nfail\n" }));
    expect(failed.slice(0, 1)).toEqual([{ item: b64("A") }]);
    const last = failed[1] as { end: string; error: { exit: number; stderr: string } };
    expect(last.end).toBe("error");
    expect(last.error.exit).toBe(3);
    expect(last.error.stderr).toHaveLength(4096);
    expect(last.error.stderr.endsWith("it failed")).toBe(true);
    expect(failed).toHaveLength(2);
  });

  it("says notServed without a handler, and lost when the provider goes away mid-command", async () => {
    const p = await proxy();
    const bare = connect(p, {});
    expect(await ndjson(await api(p, "/command", { method: "POST", body: "x" }))).toEqual([{ end: "notServed" }]);
    await bare.close();
    const provider = connect(p, { command: commandExec(executable()) });
    const pending = api(p, "/command", { method: "POST", body: "hang\n" });
    const response = await pending;
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe(`${JSON.stringify({ item: b64("waiting") })}\n`);
    // The provider ends abruptly: the command's outcome is unknown, and it is never run again.
    await provider.close();
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toBe(`${JSON.stringify({ end: "lost" })}\n`);
  });
});

describe("which transport carries a vault ask", () => {
  it("/requests before the provider has begun tools on /, the begin scope once it has; the program never knows", async () => {
    const { startExampleContainer, exampleRoot } = await import("@diverge/example-container");
    const app = await startExampleContainer();
    running.push(app);
    const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
    running.push(p);
    const via = (transport: string): ProxyHandlers => ({ vaultGet: () => ({ variant: "Present", value: new TextEncoder().encode(transport) }) });
    connect(p, via("/requests"));
    expect(await (await api(p, "/vault/k")).text()).toBe("/requests");
    const { openContainer } = await import("../src/index.js");
    const container = await openContainer(`ws://127.0.0.1:${p.port}`, { handlers: via("begin scope") });
    running.push(container);
    // Connected but not begun: still /requests.
    expect(await (await api(p, "/vault/k")).text()).toBe("/requests");
    await container.beginTools({ arguments: { greeting: "Hi" } });
    expect(await (await api(p, "/vault/k")).text()).toBe("begin scope");
    // A channel the provider does not answer is a bare finish: not served, 503.
    expect((await api(p, "/vault/k", { method: "DELETE" })).status).toBe(503);
    // Command has no begin-scope channel: it stays on /requests.
    expect(await ndjson(await api(p, "/command", { method: "POST", body: "x" }))).toEqual([{ end: "notServed" }]);
  }, 120_000);
});
