// The generated exchange layer end to end on real sockets: the proxy's generated typed asks
// (`proxy.paths.asks`, bound onto the generic engine) against the provider's generated dispatch to
// `ProviderHandlers` (through connectProxy), and against a raw provider for what a real one never sends.
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeRequestsAsk, type CommandResponse, type RequestsAsk } from "@diverge/codec";
import { startProxy, type RunningProxy } from "@diverge/server";
import { connectProxy, type ProxyConnection, type ProxyHandlers } from "../src/index.js";
import { delay } from "./paths-helpers.js";

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of running.splice(0).reverse()) await item.close();
});

async function proxy(): Promise<RunningProxy> {
  const p = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  running.push(p);
  return p;
}

function connect(p: RunningProxy, handlers: ProxyHandlers): ProxyConnection {
  const connection = connectProxy(`ws://127.0.0.1:${p.port}`, handlers, { minBackoffMs: 10, maxBackoffMs: 50 });
  running.push(connection);
  return connection;
}

const text = (s: string) => new TextEncoder().encode(s);
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** A provider made of raw sockets: holds `/requests`, hands each ask to `onAsk`. */
async function rawProvider(p: RunningProxy, onAsk: (ask: RequestsAsk, requests: WebSocket) => void): Promise<WebSocket> {
  const requests = new WebSocket(`ws://127.0.0.1:${p.port}/requests`);
  requests.on("error", () => {});
  requests.on("message", (data) => onAsk(decodeRequestsAsk(new Uint8Array(data as Buffer)), requests));
  await new Promise((resolve) => requests.once("open", resolve));
  running.push({ close: async () => void requests.terminate() });
  return requests;
}

/** Opens an answer path, sends `messages`, then ends it cleanly (or abruptly). */
async function answer(p: RunningProxy, path: string, messages: Uint8Array[], ending: "clean" | "abrupt" = "clean"): Promise<void> {
  const socket = new WebSocket(`ws://127.0.0.1:${p.port}${path}`);
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("open", resolve));
  for (const m of messages) socket.send(m);
  if (ending === "abrupt") socket.terminate();
  else socket.close();
  await new Promise((resolve) => socket.once("close", resolve));
}

describe("the generated exchange layer over real sockets", () => {
  it("asks vault get, set, lock and unlock with typed methods, and the provider's typed handlers answer", async () => {
    const p = await proxy();
    const store = new Map<string, Uint8Array>();
    const seen: unknown[] = [];
    connect(p, {
      vaultGet: ({ key }, cx) => {
        seen.push(["get", key, cx.path.startsWith("/vault/get/")]);
        const value = store.get(key);
        return value ? { variant: "Present", value } : { variant: "Missing" };
      },
      vaultSet: async ({ key, value }) => {
        store.set(key, value.slice());
        return { variant: "Done" };
      },
      vaultLock: async ({ key, ttl }) => (ttl === 0 ? { variant: "Error", message: `ttl is zero for ${key}` } : { variant: "Done" }),
    });
    const asks = p.paths.asks;
    expect(await asks.vaultGet({ key: "k" })).toEqual({ type: "answered", answer: { variant: "Missing" } });
    expect(await asks.vaultSet({ key: "k", value: text("v1") })).toEqual({ type: "answered", answer: { variant: "Done" } });
    const got = await asks.vaultGet({ key: "k" });
    expect(got.type === "answered" && got.answer.variant === "Present" ? hex(got.answer.value) : got).toBe(hex(text("v1")));
    expect(await asks.vaultLock({ key: "k", ttl: 0 })).toEqual({ type: "answered", answer: { variant: "Error", message: "ttl is zero for k" } });
    expect(await asks.vaultLock({ key: "k", ttl: 30 })).toEqual({ type: "answered", answer: { variant: "Done" } });
    // No unlock handler: the path closes with no message, which the proxy reads as not served.
    const unlock = await asks.vaultUnlock({ key: "k" });
    expect(unlock.type).toBe("notServed");
    expect(seen).toEqual([
      ["get", "k", true],
      ["get", "k", true],
    ]);
  });

  it("streams a command's items as they come, the error last, then says it is done", async () => {
    const p = await proxy();
    const runs: string[] = [];
    connect(p, {
      command: async function* ({ command }): AsyncIterable<CommandResponse> {
        runs.push(new TextDecoder().decode(command));
        yield { variant: "Item", item: text("one") };
        await delay(20);
        yield { variant: "Item", item: new Uint8Array(0) };
        yield { variant: "Error", error: { exit: 2 } };
      },
    });
    const stream = p.paths.asks.command({ command: text("ls -l") });
    const items: unknown[] = [];
    for await (const message of stream) items.push(message.variant === "Item" ? ["item", new TextDecoder().decode(message.item)] : ["error", message.error]);
    expect(items).toEqual([
      ["item", "one"],
      ["item", ""],
      ["error", { exit: 2 }],
    ]);
    expect(await stream.ended).toEqual({ type: "done" });
    expect(runs).toEqual(["ls -l"]);
  });

  it("a command whose handler fails after an item ends its path abruptly: lost, never run again", async () => {
    const p = await proxy();
    let runs = 0;
    connect(p, {
      command: async function* (): AsyncIterable<CommandResponse> {
        runs++;
        yield { variant: "Item", item: text("partial") };
        throw new Error("the executable vanished");
      },
    });
    const stream = p.paths.asks.command({ command: text("x") });
    const items: CommandResponse[] = [];
    for await (const message of stream) items.push(message);
    expect(items).toHaveLength(1);
    expect(await stream.ended).toEqual({ type: "lost" });
    await delay(100);
    expect(runs).toBe(1);
  });

  it("a vault ask whose /requests ends before its path opened is lost and never asked again; an MCP ask is asked again", async () => {
    const p = await proxy();
    const kinds: string[] = [];
    const first = await rawProvider(p, (ask) => {
      kinds.push(ask.variant);
      if (kinds.length === 2) first.terminate();
    });
    const vault = p.paths.asks.vaultDelete({ key: "gone" });
    const mcp = p.paths.asks.mcpListTools({ params: null });
    expect(await vault).toEqual({ type: "lost" });
    // The next /requests connection is asked the MCP exchange again, and only that.
    const again: RequestsAsk[] = [];
    await rawProvider(p, (ask) => {
      again.push(ask);
      void answer(p, `/mcp/list-tools/${ask.channel}`, [new Uint8Array([0, ...text('{"tools":[]}')])]);
    });
    expect(await mcp).toEqual({ type: "answered", answer: { variant: "Result", result: { tools: [] } } });
    // (The notification ask that follows the first MCP exchange is not the vault ask.)
    expect(again.map((a) => a.variant).filter((k) => k !== "McpNotifications")).toEqual(["McpListTools"]);
  });

  it("an answer that does not decode is unreadable with the decoder's exact text; an abrupt end of a vault path is lost", async () => {
    const p = await proxy();
    await rawProvider(p, (ask) => {
      if (ask.variant === "VaultGet") void answer(p, `/vault/get/${ask.channel}`, [new Uint8Array([3])]);
      if (ask.variant === "VaultSet") void answer(p, `/vault/set/${ask.channel}`, [new Uint8Array([1, 0xff])]);
      if (ask.variant === "VaultLock") void answer(p, `/vault/lock/${ask.channel}`, [], "abrupt");
      if (ask.variant === "Command") void answer(p, `/command/${ask.channel}`, [new Uint8Array([0, 0x61]), new Uint8Array([])]);
    });
    const get = await p.paths.asks.vaultGet({ key: "k" });
    expect(get.type === "unreadable" ? get.error.message : get).toBe("unknown vault response kind 3");
    const set = await p.paths.asks.vaultSet({ key: "k", value: text("v") });
    expect(set.type === "unreadable" ? set.error.message : set).toBe("vault error message is not utf-8");
    expect(await p.paths.asks.vaultLock({ key: "k", ttl: 5 })).toEqual({ type: "lost" });
    const command = p.paths.asks.command({ command: text("c") });
    const items: CommandResponse[] = [];
    for await (const item of command) items.push(item);
    expect(items.map((i) => i.variant)).toEqual(["Item"]);
    const ended = await command.ended;
    expect(ended.type === "unreadable" ? ended.error.message : ended).toBe("command response is empty");
  });

  it("an ask given up before it was sent is dropped: the provider never sees it", async () => {
    const p = await proxy();
    const giveUp = new AbortController();
    const pending = p.paths.asks.vaultGet({ key: "late" }, { signal: giveUp.signal });
    giveUp.abort();
    expect(await pending).toEqual({ type: "aborted" });
    const kinds: string[] = [];
    await rawProvider(p, (ask) => kinds.push(ask.variant));
    const served = p.paths.asks.vaultDelete({ key: "now" });
    await delay(100);
    expect(kinds).toEqual(["VaultDelete"]);
    void served;
  });
});
