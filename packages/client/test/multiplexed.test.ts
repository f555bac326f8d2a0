// The provider library against a real proxy and the real example container: begin, info, secrets,
// the five MCP exchanges, the daemon pair both ways, and the `diverge tools` command line.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeClientFrame, encodeClientFrame, encodeServerFrame } from "@diverge/codec";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { startProxy, type ProxyOptions, type RunningProxy } from "@diverge/server";
import { WebSocket } from "ws";
import { ContainerError, openContainer, type AnnouncedConnection, type MultiplexedConnection, type OpenContainerOptions } from "../src/index.js";

let app: ExampleContainer;
const proxies: RunningProxy[] = [];
const connections: MultiplexedConnection[] = [];

beforeAll(async () => {
  app = await startExampleContainer();
});
afterAll(async () => {
  await app.close();
});
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close();
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

async function container(options: OpenContainerOptions = {}, proxyOptions: ProxyOptions = {}): Promise<{ proxy: RunningProxy; connection: MultiplexedConnection }> {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, ...proxyOptions });
  proxies.push(proxy);
  const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, options);
  connections.push(connection);
  return { proxy, connection };
}

async function rejection(promise: Promise<unknown>): Promise<ContainerError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ContainerError);
    return error as ContainerError;
  }
  throw new Error("expected a rejection");
}

describe("openContainer", () => {
  it("begins, reads the info, feeds secrets and speaks MCP with the container", async () => {
    const { connection } = await container();
    await expect(connection.info()).rejects.toMatchObject({ detail: { variant: "NotBegun" } });
    const tools = (await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example", digest: "sha256:00" } })) as { name: string }[];
    expect(tools.map((tool) => tool.name)).toEqual(["greeter"]);
    const info = await connection.info();
    expect(info?.frontMatter.title).toBe("Greeter");
    expect(info?.body).toContain("# Greeter");
    const refused = await rejection(connection.feedSecrets({ WRONG: "x" }));
    expect(refused.detail).toEqual({ variant: "Refused", what: "secrets", error: { error: "missing secrets", missing: ["API_KEY"] } });
    await connection.feedSecrets({ API_KEY: "k-1" });
    const listed = await connection.mcp.listTools();
    expect(listed.tools.map((tool) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    expect((await connection.mcp.listResources()).resources.map((r) => r.uri)).toEqual(["example://readme"]);
    expect(await connection.mcp.callTool({ name: "greet", arguments: { name: "Ada" } })).toEqual({ content: [{ type: "text", text: "Hello, Ada!" }] });
    expect((await connection.mcp.readResource({ uri: "example://readme" })).contents).toEqual([{ uri: "example://readme", text: "The example greeter." }]);
    const missing = await rejection(connection.mcp.readResource({ uri: "example://nope" }));
    expect(missing.detail.variant === "Mcp" && missing.detail.error.code).toBe(-32602);
  });

  it("works with any WHATWG-shaped WebSocket implementation (ArrayBuffer messages, no pause)", async () => {
    const made: string[] = [];
    class PlainWebSocket extends WebSocket {
      constructor(url: string) {
        super(url);
        made.push(url);
        this.binaryType = "blob";
      }
      override pause = undefined as never;
      override resume = undefined as never;
    }
    const { connection } = await container({ WebSocket: PlainWebSocket as never }, { secretsGate: false });
    expect(made).toHaveLength(1);
    expect(connection.frames.socket.binaryType).toBe("arraybuffer");
    await connection.beginTools({ arguments: { greeting: "Hej" } });
    expect(await connection.mcp.callTool({ name: "greet", arguments: { name: "Liv" } })).toEqual({ content: [{ type: "text", text: "Hej, Liv!" }] });
  });

  it("delivers notifications in order while the stream is open", async () => {
    const { connection } = await container({}, { secretsGate: false });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const stream = connection.mcp.notifications();
    await connection.mcp.callTool({ name: "notify", arguments: { text: "one" } });
    await connection.mcp.callTool({ name: "notify", arguments: { text: "two" } });
    const seen: unknown[] = [];
    for await (const notification of stream) {
      seen.push(notification);
      if (seen.length === 2) stream.close();
    }
    expect(seen).toEqual([
      { method: "notifications/message", params: { level: "info", data: "one" } },
      { method: "notifications/message", params: { level: "info", data: "two" } },
    ]);
  });

  it("rejects a refused begin with Refused, leaves the connection not begun, and refuses a begin after Begun", async () => {
    const { connection } = await container();
    expect((await rejection(connection.beginTools({ arguments: 7 }))).detail.variant).toBe("Refused");
    await expect(connection.info()).rejects.toMatchObject({ detail: { variant: "NotBegun" } });
    // A refused begin leaves the connection not begun: another begin on the same connection works.
    const tools = await connection.beginTools({ arguments: { greeting: "Hi" } });
    expect(tools.map((tool) => tool.name)).toEqual(["greeter"]);
    const third = await rejection(connection.beginTools({ arguments: { greeting: "Hi" } }));
    expect(third.detail).toMatchObject({ variant: "Refused", error: { error: "the connection has already begun" } });
    // The refused third begin did not end the begun scope.
    expect((await connection.info())?.frontMatter.title).toBe("Greeter");
  });

  it("holds MCP exchanges until the secrets are fed", async () => {
    const { connection } = await container();
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    let answered = false;
    const call = connection.mcp.callTool({ name: "greet", arguments: { name: "Bo" } }).then((result) => {
      answered = true;
      return result;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(answered).toBe(false);
    await connection.feedSecrets({ API_KEY: "k" });
    expect(await call).toEqual({ content: [{ type: "text", text: "Hi, Bo!" }] });
  });

  it("tells the stream ended when the proxy goes away", async () => {
    const { proxy, connection } = await container();
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const pending = connection.mcp.listTools();
    await proxy.close();
    expect((await rejection(pending)).detail.variant).toBe("Lost");
    await connection.ended();
  });
});

describe("the daemon pair", () => {
  it("relays program frames to the provider and the provider's frames to the program, in order", async () => {
    const accepted: { id: number; frames: string[]; ended: boolean[] }[] = [];
    const { proxy, connection } = await container({
      onDaemon: (announced: AnnouncedConnection) => {
        const record = { id: announced.id, frames: [] as string[], ended: [] as boolean[] };
        accepted.push(record);
        const half = announced.accept({
          data: (frame) => {
            record.frames.push(Buffer.from(frame).toString("hex"));
            // A daemon client frame is a Frames-layer client frame.
            const request = decodeClientFrame(frame);
            if (request.variant === "Request") {
              half.send(encodeServerFrame({ variant: "Response", scope: request.scope, channel: 0, payload: new Uint8Array([0]) }));
              half.send(encodeServerFrame({ variant: "ResponseFinish", scope: request.scope, channel: 0 }));
            }
          },
          end: (served) => record.ended.push(served),
        });
      },
    });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const program = new WebSocket(`ws://127.0.0.1:${proxy.programPort}/daemon`);
    const received: string[] = [];
    const closed = new Promise<number>((resolve) => program.on("close", (code) => resolve(code)));
    program.on("message", (data: Buffer) => received.push(data.toString("hex")));
    await new Promise((resolve) => program.once("open", resolve));
    const request = encodeClientFrame({ variant: "Request", scope: 9, channel: 0, payload: new Uint8Array([0x0b]) });
    program.send(request);
    program.send(encodeClientFrame({ variant: "ChannelRequest", scope: 9, channel: 3, payload: new Uint8Array([1, 2]) }));
    await waitFor(() => received.length === 2);
    expect(received).toEqual(["02000000090000000000", "030000000900000000"]);
    expect(accepted[0]!.frames).toEqual(["010000000900000000" + "0b", "04000000090000000301" + "02"]);
    // An auth frame never passes: the proxy closes the program's socket and finishes the provider's half.
    program.send(encodeClientFrame({ variant: "Authorization", scope: 0, channel: 0, payload: new Uint8Array([0]) }));
    expect(await closed).toBe(1008);
    await waitFor(() => accepted[0]!.ended.length === 1);
    expect(accepted[0]!.frames).toHaveLength(2);
  });

  it("closes the program's socket when the provider declines", async () => {
    const { proxy, connection } = await container({ onDaemon: (announced) => announced.decline() });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    const program = new WebSocket(`ws://127.0.0.1:${proxy.programPort}/daemon`);
    const closed = new Promise<number>((resolve) => program.on("close", (code) => resolve(code)));
    expect(await closed).toBe(1000);
  });
});

describe("diverge tools", () => {
  const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
  const run = promisify(execFile);

  it("lists, calls and reads through a proxy from the shell", async () => {
    const listProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot });
    const callProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot });
    const infoProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot });
    const resourcesProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false });
    const readProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false });
    proxies.push(listProxy, callProxy, infoProxy, resourcesProxy, readProxy);
    const common = ["--arguments", '{"greeting":"Hey"}', "--secret", "API_KEY=k"];
    const list = await run("node", [cli, "tools", "list", "--proxy", `ws://127.0.0.1:${listProxy.port}/`, ...common]);
    expect(JSON.parse(list.stdout).tools.map((tool: { name: string }) => tool.name).sort()).toEqual(["greet", "notify", "query"]);
    const call = await run("node", [cli, "tools", "call", "greet", '{"name":"Cy"}', "--proxy", `ws://127.0.0.1:${callProxy.port}/`, ...common]);
    expect(JSON.parse(call.stdout)).toEqual({ content: [{ type: "text", text: "Hey, Cy!" }] });
    const info = await run("node", [cli, "tools", "info", "--proxy", `ws://127.0.0.1:${infoProxy.port}/`, "--arguments", '{"greeting":"Hey"}']);
    expect(JSON.parse(info.stdout).frontMatter.title).toBe("Greeter");
    const resources = await run("node", [cli, "tools", "resources", "--proxy", `ws://127.0.0.1:${resourcesProxy.port}/`, "--arguments", '{"greeting":"Hey"}']);
    expect(JSON.parse(resources.stdout).resources.map((r: { uri: string }) => r.uri)).toEqual(["example://readme"]);
    const read = await run("node", [cli, "tools", "read", "example://readme", "--proxy", `ws://127.0.0.1:${readProxy.port}/`, "--arguments", '{"greeting":"Hey"}']);
    expect(JSON.parse(read.stdout).contents[0].text).toBe("The example greeter.");
    // A proxy takes one connection in its life: a second run against it is refused.
    await expect(run("node", [cli, "tools", "list", "--proxy", `ws://127.0.0.1:${listProxy.port}/`])).rejects.toMatchObject({ code: 4 });
  }, 120_000);

  it("prints its usage and refuses an unknown command", { timeout: 120_000 }, async () => {
    const help = await run("node", [cli, "tools", "--help"]);
    expect(help.stdout).toContain("--proxy");
    await expect(run("node", [cli, "tools", "frobnicate"])).rejects.toMatchObject({ code: 2 });
  });
});

async function waitFor(condition: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

