// The proxy's multiplexed connection with raw frames over a real socket: the Frames-layer rules,
// tools::begin, and every provider channel tag of seed 004 against the real example container.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, afterAll, describe, expect, it } from "vitest";
import {
  ToolsBeginChannelRequestError,
  decodeInfoAnswer,
  decodeMcpCallToolAnswer,
  decodeMcpListResourcesAnswer,
  decodeMcpListToolsAnswer,
  decodeMcpNotificationsAnswer,
  decodeMcpReadResourceAnswer,
  decodeSecretsAnswer,
  decodeToolsBeginChannelRequest,
  decodeToolsBeginResponse,
  decodeToolsBeginServerChannelRequest,
  encodeContainerProxyRequest,
  encodeToolsBeginChannelRequest,
  fromHex,
  type ServerFrame,
  type ToolsBeginChannelRequest,
} from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { WebSocket } from "ws";
import { startProxy, type ProxyOptions, type RunningProxy } from "../src/index.js";
import { parseDivergeMarkdown, readDivergeInfo } from "../src/families/info/diverge-md.js";
import { concat, json, onChannel, onScope, rawConnect, text, upgradeStatus, type RawConnection } from "./multiplexed-support.js";

let app: ExampleContainer;
const proxies: RunningProxy[] = [];
const logs: string[] = [];

beforeAll(async () => {
  app = await startExampleContainer();
});
afterAll(async () => {
  await app.close();
});
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

async function proxy(options: ProxyOptions = {}): Promise<RunningProxy> {
  const running = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, log: (line) => logs.push(line), ...options });
  proxies.push(running);
  return running;
}

const BEGIN = encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: { greeting: "Hi" } } });

async function begun(options: ProxyOptions = {}): Promise<{ proxy: RunningProxy; raw: RawConnection }> {
  const running = await proxy(options);
  const raw = await rawConnect(running.port);
  raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
  const answer = await raw.next(onScope(1));
  expect(answer.variant).toBe("Response");
  expect(decodeToolsBeginResponse((answer as { payload: Uint8Array }).payload).variant).toBe("Begun");
  return { proxy: running, raw };
}

function ask(raw: RawConnection, channel: number, request: ToolsBeginChannelRequest | Uint8Array, scope = 1): void {
  raw.send({ variant: "ChannelRequest", scope, channel, payload: request instanceof Uint8Array ? request : encodeToolsBeginChannelRequest(request) });
}

/** The one response and the finish of a provider channel. */
async function answerOn(raw: RawConnection, channel: number): Promise<Uint8Array> {
  const response = await raw.next(onChannel(1, channel));
  expect(response.variant).toBe("ChannelResponse");
  const finish = await raw.next(onChannel(1, channel));
  expect(finish.variant).toBe("ChannelResponseFinish");
  return (response as { payload: Uint8Array }).payload;
}

async function bareFinishOn(raw: RawConnection, channel: number, scope = 1): Promise<void> {
  const frame = await raw.next((f) => (f.variant === "ChannelResponse" || f.variant === "ChannelResponseFinish") && f.scope === scope && f.channel === channel);
  expect(frame.variant).toBe("ChannelResponseFinish");
}

const isFinish = (frame: ServerFrame) => frame.variant === "ChannelResponseFinish";

describe("the connection on /", () => {
  it("is exactly one in the proxy's life: later upgrades get 409, even after the first ended", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    expect(await upgradeStatus(running.port)).toBe(409);
    raw.socket.close();
    await raw.closed;
    expect(await upgradeStatus(running.port)).toBe(409);
  });

  it("sends nothing before the provider's first frame, and ignores text messages", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    raw.socket.send("hello");
    raw.socket.send(JSON.stringify({ type: 1 }));
    expect(await raw.none(() => true, 200)).toBe(true);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
    expect((await raw.next(onScope(1))).variant).toBe("Response");
  });

  it("closes the connection when a type-0 frame arrives, and sends nothing further", async () => {
    const { raw } = await begun();
    raw.send("00 00000000 00000000 00746f6b");
    expect(await raw.closed).toBeGreaterThan(0);
    expect(raw.frames.filter((f) => f.scope !== 1 || f.variant !== "Response")).toEqual([]);
  });

  it("disregards malformed frames and frames naming no open scope or channel, and goes on", async () => {
    const { proxy: running, raw } = await begun();
    raw.send("");
    raw.send("04 00000001 000000");
    raw.send("02 00000001 00000000 00");
    raw.send("03 00000001 00000000");
    raw.send("07 00000001 00000000");
    raw.send("04 00000063 00000000 01");
    raw.send("05 00000001 00000007 00");
    raw.send("06 00000001 00000007");
    expect(await raw.none(() => true, 200)).toBe(true);
    expect(running.multiplexed.connection!.disregarded.map((d) => d.reason)).toEqual([
      "malformed",
      "malformed",
      "malformed",
      "malformed",
      "malformed",
      "unknown-scope",
      "unknown-channel",
      "unknown-channel",
    ]);
    ask(raw, 0, { variant: "Info" });
    expect(decodeInfoAnswer(await answerOn(raw, 0)).variant).toBe("Info");
    expect(raw.socket.readyState).toBe(WebSocket.OPEN);
  });

  it("disregards a request naming the open begin scope", async () => {
    const { proxy: running, raw } = await begun();
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
    expect(await raw.none(onScope(1), 300)).toBe(true);
    expect(running.multiplexed.connection!.disregarded).toEqual([{ reason: "scope-open", scope: 1 }]);
  });

  it("disregards a channel request naming a channel the provider has open; the number is usable again after its finish", async () => {
    const { proxy: running, raw } = await begun({ secretsGate: false });
    ask(raw, 5, { variant: "McpNotifications" });
    ask(raw, 5, { variant: "Info" });
    expect(await raw.none(onChannel(1, 5), 300)).toBe(true);
    expect(running.multiplexed.connection!.disregarded).toEqual([{ reason: "channel-open", scope: 1, channel: 5 }]);
    ask(raw, 6, { variant: "Info" });
    await answerOn(raw, 6);
    ask(raw, 6, { variant: "Info" });
    await answerOn(raw, 6);
  });

  it("keeps channel numbers per opener: the proxy's channel 0 and the provider's channel 0 coexist", async () => {
    const { proxy: running, raw } = await begun();
    const { connect } = await import("node:net");
    const driver = connect({ host: "127.0.0.1", port: running.multiplexed.pgPort });
    driver.on("error", () => {});
    const announce = await raw.next((f) => f.variant === "ChannelRequest");
    expect(announce.channel).toBe(0);
    expect(decodeToolsBeginServerChannelRequest((announce as { payload: Uint8Array }).payload)).toEqual({ variant: "Postgres", connection_id: 1 });
    ask(raw, 0, { variant: "Info" });
    expect(decodeInfoAnswer(await answerOn(raw, 0)).variant).toBe("Info");
    driver.destroy();
  });
});

describe("tools::begin", () => {
  it("hands the arguments to the program and answers with the tools it declared, then holds the scope open", async () => {
    const { proxy: running, raw } = await begun();
    expect(app.registered).toEqual({ greeting: "Hi" });
    const response = raw.frames.find((f) => f.variant === "Response") as { payload: Uint8Array };
    const answer = decodeToolsBeginResponse(response.payload);
    expect(answer.variant === "Begun" && (answer.tools as { name: string }[]).map((tool) => tool.name)).toEqual(["greeter"]);
    expect(await raw.none((f) => f.variant === "ResponseFinish", 200)).toBe(true);
    // The scope's finish comes when the proxy ends.
    await running.close();
    const finish = await raw.next((f) => f.variant === "ResponseFinish");
    expect(finish.scope).toBe(1);
  });

  it("carries an image when one is given", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: { greeting: "Yo" }, image: { name: "a/b", digest: "sha256:ab" } } }) });
    const answer = await raw.next(onScope(1));
    expect(decodeToolsBeginResponse((answer as { payload: Uint8Array }).payload).variant).toBe("Begun");
  });

  it("answers a second begin with exactly one error and the finish; the first goes on", async () => {
    const { raw } = await begun();
    raw.send({ variant: "Request", scope: 2, channel: 0, payload: BEGIN });
    const error = await raw.next(onScope(2));
    expect(error.variant).toBe("Response");
    const decoded = decodeToolsBeginResponse((error as { payload: Uint8Array }).payload);
    expect(decoded.variant).toBe("NotBegun");
    expect((await raw.next(onScope(2))).variant).toBe("ResponseFinish");
    expect(await raw.none(onScope(2), 200)).toBe(true);
    ask(raw, 0, { variant: "Info" });
    await answerOn(raw, 0);
  });

  it("answers the program's refusal with [1] and its words, then the finish", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: { nope: true } } }) });
    const error = await raw.next(onScope(1));
    expect(decodeToolsBeginResponse((error as { payload: Uint8Array }).payload)).toEqual({ variant: "NotBegun", error: { error: "arguments must be an object with a string `greeting`" } });
    expect((await raw.next(onScope(1))).variant).toBe("ResponseFinish");
  });

  it("refuses tools that are not ToolDeclarations (a tool with no name) with [1] naming why, and stays not begun", async () => {
    // A program whose /register declares a tool without the `name` every tool has (agents.md §3.3).
    const program = createServer((request, response) => {
      request.resume();
      request.on("end", () => response.writeHead(200, { "content-type": "application/json" }).end('[{"memory":1024}]'));
    });
    await new Promise<void>((resolve) => program.listen(0, "127.0.0.1", resolve));
    try {
      const running = await proxy({ appPort: (program.address() as AddressInfo).port });
      const raw = await rawConnect(running.port);
      raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
      const error = await raw.next(onScope(1));
      expect(decodeToolsBeginResponse((error as { payload: Uint8Array }).payload)).toEqual({
        variant: "NotBegun",
        error: { error: "the program declared tools a provider cannot read: missing field `name` at `[0]`", status: 200 },
      });
      expect((await raw.next(onScope(1))).variant).toBe("ResponseFinish");
      expect(logs.some((line) => /cannot read: missing field `name`/.test(line))).toBe(true);
    } finally {
      program.closeAllConnections();
      await new Promise<void>((resolve) => program.close(() => resolve()));
    }
  });

  it("answers an unreadable request with a bare finish, each kind of unreadable", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    const unreadable = [
      new Uint8Array(),
      fromHex("09"),
      // agents::begin (endpoint 0) with no begin object, and one that is not a begin.
      fromHex("00"),
      concat(fromHex("00"), json({ agent: null })),
      fromHex("01"),
      concat(fromHex("01"), text("[1]")),
      concat(fromHex("01"), json({ image: { name: "a", digest: "b" } })),
      concat(fromHex("01"), json({ arguments: 1, image: { name: "a" } })),
    ];
    unreadable.forEach((payload, i) => raw.send({ variant: "Request", scope: 10 + i, channel: 0, payload }));
    for (let i = 0; i < unreadable.length; i++) expect((await raw.next(onScope(10 + i))).variant).toBe("ResponseFinish");
    // None of them counted as the begin.
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
    expect((await raw.next(onScope(1))).variant).toBe("Response");
  });

  it("answers a channel opened before Begun with a bare finish", async () => {
    const running = await proxy();
    const raw = await rawConnect(running.port);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
    ask(raw, 0, { variant: "Info" });
    await bareFinishOn(raw, 0);
    await raw.next(onScope(1));
    ask(raw, 1, { variant: "Info" });
    await answerOn(raw, 1);
  });
});

describe("the provider's channels (seed 004)", () => {
  it("tag 1 Info: DIVERGE.md from the container root, parsed", async () => {
    const { raw } = await begun();
    ask(raw, 0, { variant: "Info" });
    ask(raw, 1, fromHex("01 ff ff".replace(/ /g, "")));
    const expected = (await readDivergeInfo(exampleRoot))!;
    for (const channel of [0, 1]) {
      const answer = decodeInfoAnswer(await answerOn(raw, channel));
      expect(answer).toEqual({ variant: "Info", info: { frontMatter: expected.frontMatter, body: expected.body } });
    }
    expect((expected.frontMatter as { title?: string }).title).toBe("Greeter");
    expect(expected.body.startsWith("# Greeter")).toBe(true);
  });

  it("tag 1 Info: [1] when the image has no DIVERGE.md", async () => {
    const empty = await mkdtemp(join(tmpdir(), "diverge-root-"));
    try {
      const { raw } = await begun({ root: empty });
      ask(raw, 0, { variant: "Info" });
      expect(await answerOn(raw, 0)).toEqual(fromHex("01"));
      await writeFile(join(empty, "DIVERGE.md"), "plain text, no front matter");
      ask(raw, 1, { variant: "Info" });
      expect(decodeInfoAnswer(await answerOn(raw, 1))).toEqual({ variant: "Info", info: { frontMatter: {}, body: "plain text, no front matter" } });
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it("parses front matter: a mapping, none, or a block that is not YAML or not a mapping", () => {
    expect(parseDivergeMarkdown("---\na: 1\n---\nbody\n")).toEqual({ frontMatter: { a: 1 }, body: "body\n" });
    expect(parseDivergeMarkdown("---\r\na: [1\r\n---\r\nx")).toEqual({ frontMatter: {}, body: "---\r\na: [1\r\n---\r\nx" });
    expect(parseDivergeMarkdown("# Title")).toEqual({ frontMatter: {}, body: "# Title" });
    expect(parseDivergeMarkdown("---\n- 1\n---\n")).toEqual({ frontMatter: {}, body: "---\n- 1\n---\n" });
  });

  it("tags 3 to 6: the four MCP exchanges relayed to the container's MCP server", async () => {
    const { raw } = await begun({ secretsGate: false });
    ask(raw, 3, { variant: "McpListTools", params: null });
    ask(raw, 4, { variant: "McpListResources", params: null });
    ask(raw, 5, { variant: "McpCallTool", params: { name: "greet", arguments: { name: "Ada" } } });
    ask(raw, 6, { variant: "McpReadResource", params: { uri: "example://readme" } });
    const tools = decodeMcpListToolsAnswer(await answerOn(raw, 3), { check: checkMcp });
    expect(tools.variant === "Result" && tools.result.tools.map((tool) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    const resources = decodeMcpListResourcesAnswer(await answerOn(raw, 4), { check: checkMcp });
    expect(resources.variant === "Result" && resources.result.resources.map((r) => r.uri)).toEqual(["example://readme"]);
    const call = decodeMcpCallToolAnswer(await answerOn(raw, 5), { check: checkMcp });
    expect(call).toEqual({ variant: "Result", result: { content: [{ type: "text", text: "Hi, Ada!" }] } });
    const read = decodeMcpReadResourceAnswer(await answerOn(raw, 6), { check: checkMcp });
    expect(read).toEqual({ variant: "Result", result: { contents: [{ uri: "example://readme", text: "The example greeter." }] } });
  });

  it("tags 3 to 6: the server's own error is relayed as [1] with its code", async () => {
    const { raw } = await begun({ secretsGate: false });
    ask(raw, 6, { variant: "McpReadResource", params: { uri: "example://missing" } });
    const read = decodeMcpReadResourceAnswer(await answerOn(raw, 6), { check: checkMcp });
    expect(read.variant).toBe("Error");
    expect(read.variant === "Error" && read.error.code).toBe(-32602);
    expect(read.variant === "Error" && read.error.message).toContain("example://missing");
    // The SDK client prefixes what it read; the relay takes that prefix off again.
    expect(read.variant === "Error" && read.error.message.startsWith("MCP error -32602: MCP error")).toBe(false);
  });

  it("tag 7 Notifications: one [0] per notification while the channel lives", async () => {
    const { raw } = await begun({ secretsGate: false });
    ask(raw, 7, { variant: "McpNotifications" });
    ask(raw, 8, { variant: "McpNotifications" });
    ask(raw, 9, { variant: "McpCallTool", params: { name: "notify", arguments: { text: "ping" } } });
    await answerOn(raw, 9);
    for (const channel of [7, 8]) {
      const note = await raw.next(onChannel(1, channel));
      expect(note.variant).toBe("ChannelResponse");
      expect(decodeMcpNotificationsAnswer((note as { payload: Uint8Array }).payload, { check: checkMcp })).toEqual({
        variant: "Notification",
        notification: { method: "notifications/message", params: { level: "info", data: "ping" } },
      });
    }
    expect(await raw.none((f) => isFinish(f) && (f.channel === 7 || f.channel === 8), 200)).toBe(true);
  });

  it("tag 8 Secrets: the program's refusal as [1], then Fed as [0]; the log quotes no value", async () => {
    const { raw } = await begun();
    ask(raw, 0, { variant: "Secrets", values: { OTHER: "s3cr3t-value" } });
    const refused = decodeSecretsAnswer(await answerOn(raw, 0));
    expect(refused).toEqual({ variant: "Refused", refusal: { error: "missing secrets", missing: ["API_KEY"] } });
    ask(raw, 1, { variant: "Secrets", values: { API_KEY: "s3cr3t-value" } });
    expect(decodeSecretsAnswer(await answerOn(raw, 1))).toEqual({ variant: "Fed" });
    expect(logs.join("\n")).not.toContain("s3cr3t");
  });

  it("tag 8 Secrets: a value with a lone surrogate escape is no text: a bare finish, never Fed, the program never fed", async () => {
    const { proxy: running, raw } = await begun();
    // {"API_KEY":"s3cr3t\ud800"}, {"API_KEY":"s3cr3t\udc00"} and a lone surrogate in a key.
    const feeds = ['{"API_KEY":"s3cr3t\\ud800"}', '{"API_KEY":"\\udc00s3cr3t"}', '{"API_KEY":"s3cr3t","\\ud83d":"x"}'];
    feeds.forEach((feed, i) => ask(raw, 30 + i, concat(fromHex("08"), text(feed))));
    for (let i = 0; i < feeds.length; i++) await bareFinishOn(raw, 30 + i);
    expect(raw.frames.filter((f) => f.channel >= 30 && f.variant === "ChannelResponse")).toEqual([]);
    expect(running.gate.isOpen).toBe(false);
    // The same feed with a real character is Fed.
    ask(raw, 40, concat(fromHex("08"), text('{"API_KEY":"s3cr3t\\ud83d\\ude00"}')));
    expect(decodeSecretsAnswer(await answerOn(raw, 40))).toEqual({ variant: "Fed" });
    expect(logs.join("\n")).not.toContain("s3cr3t");
  });

  it("tools/call params nested 5,000 deep are past serde_json's recursion limit: a bare finish, the program never called", async () => {
    const { raw } = await begun({ secretsGate: false });
    const before = app.calls.length;
    const deep = `{"name":"greet","arguments":{"name":"x","extra":${"[".repeat(5_000)}${"]".repeat(5_000)}}}`;
    ask(raw, 50, concat(fromHex("05"), text(deep)));
    await bareFinishOn(raw, 50);
    // 127 levels are still read and relayed.
    const fine = `{"name":"greet","arguments":{"name":"x","extra":${"[".repeat(125)}${"]".repeat(125)}}}`;
    ask(raw, 51, concat(fromHex("05"), text(fine)));
    expect((await raw.next(onChannel(1, 51))).variant).toBe("ChannelResponse");
    expect(app.calls.slice(before).filter((call) => call !== "initialize")).toEqual(["tools/call greet"]);
    expect(logs.join("\n")).not.toMatch(/RangeError|call stack/);
  });

  it("tag 8 Secrets: a feed the program cannot take is refused when the program is unreachable", async () => {
    const stub = await stubProgram();
    try {
      const { raw } = await begun({ appPort: stub.port });
      await stub.stopSecrets();
      ask(raw, 0, { variant: "Secrets", values: { API_KEY: "x" } });
      const answer = decodeSecretsAnswer(await answerOn(raw, 0));
      expect(answer.variant).toBe("Refused");
    } finally {
      await stub.close();
    }
  });

  it("holds every MCP exchange until the first Fed, then serves them in order", async () => {
    const { proxy: running, raw } = await begun();
    const before = app.calls.length;
    ask(raw, 3, { variant: "McpCallTool", params: { name: "greet", arguments: { name: "one" } } });
    ask(raw, 4, { variant: "McpReadResource", params: { uri: "example://readme" } });
    ask(raw, 5, { variant: "McpListTools", params: null });
    ask(raw, 6, { variant: "McpCallTool", params: { name: "greet", arguments: { name: "two" } } });
    ask(raw, 7, { variant: "Info" });
    // Info is no MCP exchange: it is answered at once.
    await answerOn(raw, 7);
    expect(await raw.none((f) => f.channel >= 3 && f.channel <= 6, 400)).toBe(true);
    expect(app.calls.length).toBe(before);
    expect(running.gate.isOpen).toBe(false);
    ask(raw, 0, { variant: "Secrets", values: { OTHER: "nope" } });
    expect(decodeSecretsAnswer(await answerOn(raw, 0)).variant).toBe("Refused");
    expect(await raw.none((f) => f.channel >= 3 && f.channel <= 6, 200)).toBe(true);
    ask(raw, 1, { variant: "Secrets", values: { API_KEY: "k" } });
    expect(decodeSecretsAnswer(await answerOn(raw, 1)).variant).toBe("Fed");
    for (const channel of [3, 4, 5, 6]) await answerOn(raw, channel);
    const made = app.calls.slice(before).filter((call) => call !== "initialize");
    expect(made).toEqual(["tools/call greet", "resources/read example://readme", "tools/list", "tools/call greet"]);
  });

  it("answers with -32603 when the container's MCP server cannot be reached; notifications get one [1] and the finish", async () => {
    const stub = await stubProgram();
    try {
      const { raw } = await begun({ appPort: stub.port, secretsGate: false });
      ask(raw, 3, { variant: "McpListTools", params: null });
      const answer = decodeMcpListToolsAnswer(await answerOn(raw, 3), { check: checkMcp });
      expect(answer.variant === "Error" && answer.error.code).toBe(-32603);
      ask(raw, 4, { variant: "McpNotifications" });
      const note = decodeMcpNotificationsAnswer(await answerOn(raw, 4), { check: checkMcp });
      expect(note.variant === "Error" && note.error.code).toBe(-32603);
    } finally {
      await stub.close();
    }
  });

  it("tag 0 Postgres: nothing is read before the provider's half opens, then bytes flow both ways in order", async () => {
    const { proxy: running, raw } = await begun();
    const { connect } = await import("node:net");
    const driver = connect({ host: "127.0.0.1", port: running.multiplexed.pgPort });
    const fromDatabase: Buffer[] = [];
    driver.on("data", (chunk: Buffer) => fromDatabase.push(chunk));
    const driverEnded = new Promise<void>((resolve) => driver.on("end", () => resolve()));
    await new Promise((resolve) => driver.once("connect", resolve));
    driver.write("startup");
    driver.write("-more");
    const announce = await raw.next((f) => f.variant === "ChannelRequest");
    const { connection_id } = decodeToolsBeginServerChannelRequest((announce as { payload: Uint8Array }).payload) as { connection_id: number };
    // No provider half yet: nothing of the driver's crosses.
    expect(await raw.none((f) => f.variant === "ChannelResponse", 200)).toBe(true);
    ask(raw, 4, { variant: "Postgres", connection_id });
    let carried = "";
    while (carried.length < "startup-more".length) carried += new TextDecoder().decode(((await raw.next(onChannel(1, 4))) as { payload: Uint8Array }).payload);
    expect(carried).toBe("startup-more");
    // A second provider half for the same id is refused with a bare finish.
    ask(raw, 5, { variant: "Postgres", connection_id });
    await bareFinishOn(raw, 5);
    // What the database says goes to the driver, in order; the finish closes the driver's socket.
    raw.send({ variant: "ChannelResponse", scope: 1, channel: announce.channel, payload: text("R1") });
    raw.send({ variant: "ChannelResponse", scope: 1, channel: announce.channel, payload: text("R2") });
    raw.send({ variant: "ChannelResponseFinish", scope: 1, channel: announce.channel });
    await driverEnded;
    expect(Buffer.concat(fromDatabase).toString()).toBe("R1R2");
    driver.end();
    expect((await raw.next(onChannel(1, 4))).variant).toBe("ChannelResponseFinish");
  });

  it("tag 0 Postgres: a driver that reads slowly holds the provider's bytes in its own socket, within its bound, and stalls nothing else", async () => {
    const { proxy: running, raw } = await begun({ secretsGate: false });
    const { connect } = await import("node:net");
    const driver = connect({ host: "127.0.0.1", port: running.multiplexed.pgPort });
    await new Promise((resolve) => driver.once("connect", resolve));
    driver.pause();
    const announce = await raw.next((f) => f.variant === "ChannelRequest");
    const chunk = new Uint8Array(64 * 1024);
    const chunks = 24; // 1.5 MiB, within the default per-pair budget of 2 MiB (past it the connection pauses)
    for (let i = 0; i < chunks; i++) {
      chunk.fill(i % 251);
      raw.send({ variant: "ChannelResponse", scope: 1, channel: announce.channel, payload: chunk });
    }
    // The connection is not paused for it: an exchange beside it is answered.
    ask(raw, 3, { variant: "McpListTools", params: null });
    await answerOn(raw, 3);
    const stalled = running.multiplexed.postgresStats();
    console.log(`slow driver: ${JSON.stringify({ carriedWhileStalled: stalled.toProgramBytes, maxProgramBuffered: stalled.maxProgramBuffered })}`);
    expect(stalled.maxProgramBuffered).toBeLessThanOrEqual(2 * 1024 * 1024);
    expect(stalled.endedOverBacklog).toBe(0);
    expect(stalled.pausedConnection).toBe(0);
    // Once the driver reads, everything arrives, in order.
    let received = 0;
    let inOrder = true;
    driver.on("data", (data: Buffer) => {
      for (let k = 0; k < data.length; k += 4096) if (data[k] !== Math.floor((received + k) / chunk.length) % 251) inOrder = false;
      received += data.length;
    });
    driver.resume();
    await waitUntil(() => received === chunks * chunk.length, 20_000);
    expect(inOrder).toBe(true);
    driver.destroy();
  }, 120_000);

  it("tag 2 Daemon: the program's frames reach the provider's half once it opens, the provider's reach the program", async () => {
    const { proxy: running, raw } = await begun();
    const program = new WebSocket(`ws://127.0.0.1:${running.programPort}/daemon`);
    const toProgram: string[] = [];
    program.on("message", (data: Buffer) => toProgram.push(data.toString("hex")));
    await new Promise((resolve) => program.once("open", resolve));
    program.send(fromHex("010000000900000000" + "0b"));
    const announce = await raw.next((f) => f.variant === "ChannelRequest");
    expect(decodeToolsBeginServerChannelRequest((announce as { payload: Uint8Array }).payload)).toEqual({ variant: "Daemon", connection_id: 1 });
    ask(raw, 2, { variant: "Daemon", connection_id: 1 });
    const relayed = await raw.next(onChannel(1, 2));
    expect(Buffer.from((relayed as { payload: Uint8Array }).payload).toString("hex")).toBe("010000000900000000" + "0b");
    raw.send({ variant: "ChannelResponse", scope: 1, channel: announce.channel, payload: fromHex("02000000090000000000") });
    await waitUntil(() => toProgram.length === 1);
    expect(toProgram).toEqual(["02000000090000000000"]);
    // Something that is no client frame ends the program's connection and finishes the provider's half.
    const closed = new Promise<number>((resolve) => program.on("close", (code) => resolve(code)));
    program.send(fromHex("0100"));
    expect(await closed).toBe(1008);
    expect((await raw.next(onChannel(1, 2))).variant).toBe("ChannelResponseFinish");
  });

  it("holds a driver that connects before the provider, unread, and announces it after Begun", async () => {
    const running = await proxy();
    const { connect } = await import("node:net");
    const driver = connect({ host: "127.0.0.1", port: running.multiplexed.pgPort });
    await new Promise((resolve) => driver.once("connect", resolve));
    driver.write("early");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const raw = await rawConnect(running.port);
    raw.send({ variant: "Request", scope: 1, channel: 0, payload: BEGIN });
    const first = await raw.next();
    // Nothing is opened before Begun: the begin's answer comes first, then the announcement.
    expect(first.variant).toBe("Response");
    const announce = await raw.next((f) => f.variant === "ChannelRequest");
    expect(decodeToolsBeginServerChannelRequest((announce as { payload: Uint8Array }).payload)).toEqual({ variant: "Postgres", connection_id: 1 });
    ask(raw, 0, { variant: "Postgres", connection_id: 1 });
    const carried = await raw.next(onChannel(1, 0));
    expect(new TextDecoder().decode((carried as { payload: Uint8Array }).payload)).toBe("early");
    driver.destroy();
  });

  it("refuses a daemon dial after the provider connection has ended (503)", async () => {
    const { proxy: running, raw } = await begun();
    raw.socket.close();
    await raw.closed;
    await waitUntil(() => running.multiplexed.connection!.frames.closed);
    const program = new WebSocket(`ws://127.0.0.1:${running.programPort}/daemon`);
    program.on("error", () => {});
    const status = await new Promise<number>((resolve) => program.once("unexpected-response", (_request, response) => resolve(response.statusCode ?? 0)));
    program.terminate();
    expect(status).toBe(503);
  });

  it("tags 0 and 2: an id the proxy never announced gets a bare finish", async () => {
    const { raw } = await begun();
    ask(raw, 0, { variant: "Postgres", connection_id: 77 });
    ask(raw, 1, { variant: "Daemon", connection_id: 77 });
    await bareFinishOn(raw, 0);
    await bareFinishOn(raw, 1);
  });

  it("answers every kind of malformed channel request with a bare finish and nothing else", async () => {
    const { raw } = await begun({ secretsGate: false });
    const malformed = [
      "",
      "09",
      "ff 00",
      "00 000001",
      "00",
      "00 0000000102",
      "02 0000000700",
      "02",
      "03",
      "03 5b5d",
      "04 7b",
      "05 7b22617267756d656e7473223a7b7d7d",
      "06 5b5d",
      "08 7b224150495f4b4559223a2268756e74657232",
      "08 2268756e7465723222",
      "08 7b224150495f4b4559223a31323334357d",
    ];
    malformed.forEach((hex, i) => ask(raw, 20 + i, fromHex(hex.replace(/ /g, ""))));
    for (let i = 0; i < malformed.length; i++) await bareFinishOn(raw, 20 + i);
    expect(raw.frames.filter((f) => f.channel >= 20 && f.variant === "ChannelResponse")).toEqual([]);
    expect(logs.join("\n")).not.toContain("hunter2");
  });

  it("the Secrets decode error quotes no byte of the secrets", () => {
    for (const body of ['{"API_KEY":"hunter2', '"hunter2"', '{"API_KEY":"hunter2","B":7}', '{"hunter2":1}', "hunter2"]) {
      let caught: unknown;
      try {
        decodeToolsBeginChannelRequest(concat(fromHex("08"), text(body)), { check: checkMcp });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ToolsBeginChannelRequestError);
      const error = caught as ToolsBeginChannelRequestError;
      expect(error.variant).toBe("Secrets");
      expect(error.message.startsWith("secrets feed did not parse: ")).toBe(true);
      expect(error.message).not.toContain("hunter2");
      expect(JSON.stringify(error.detail)).not.toContain("hunter2");
    }
  });
});

/** A program that answers /register and /secrets but has no MCP server; its secrets can be stopped. */
async function stubProgram(): Promise<{ port: number; stopSecrets(): Promise<void>; close(): Promise<void> }> {
  let secretsOpen = true;
  const server: Server = createServer((request, response) => {
    request.resume();
    if (request.url === "/register") return void response.writeHead(200, { "content-type": "application/json" }).end("[]");
    if (request.url === "/secrets" && secretsOpen) return void response.writeHead(200).end("{}");
    if (request.url === "/secrets") return void request.socket.destroy();
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async stopSecrets() {
      secretsOpen = false;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitUntil(condition: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
