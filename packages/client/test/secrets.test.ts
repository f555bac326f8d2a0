// Secret values never appear in logs, error messages or thrown errors. Recognisable values are fed
// through every failure path — a malformed feed, a refused feed, a program that errors, a program
// that cannot be reached, MCP errors while secrets are set, a connection lost mid-feed, values that
// cannot be encoded — with the proxy logging every line it has, on the library and as processes
// (`diverge-proxy` without --quiet, `diverge tools … --secret-env`), and all output is searched.
import { spawn } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { inspect } from "node:util";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { encodeToolsBeginChannelRequest } from "@diverge/codec";
import { startProxy, type RunningProxy } from "@diverge/server";
import { openContainer, type MultiplexedConnection } from "../src/index.js";
import { startTestProgram, type TestProgram } from "../../server/test/hostile-support.js";

const SECRETS = {
  API_KEY: "sk-LEAKCANARY-7f3a9c1e5b",
  DB_PASSWORD: 'pw"LEAKCANARY\\quote-π-42',
  TOKEN: "tok-LEAKCANARY-ZXhhbXBsZQ==",
};
/** Each value as itself and as JSON would write it inside a string. */
const NEEDLES = Object.values(SECRETS).flatMap((value) => [value, JSON.stringify(value).slice(1, -1), Buffer.from(value).toString("base64")]);

const output: string[] = [];
const proxies: RunningProxy[] = [];
const programs: TestProgram[] = [];
const connections: MultiplexedConnection[] = [];
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close();
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.allSettled(programs.splice(0).map((program) => program.close()));
});

/** Everything a thrown error says, every way it can be printed. */
function record(error: unknown): void {
  output.push(String(error), inspect(error, { depth: 10, showHidden: true }));
  if (error instanceof Error) output.push(error.message, error.stack ?? "", JSON.stringify(error));
}

function expectNoSecret(texts: readonly string[]): void {
  const all = texts.join("\n");
  for (const needle of NEEDLES) expect(all.includes(needle), `a secret value appears in the output: …${all.slice(Math.max(0, all.indexOf(needle) - 200), all.indexOf(needle) + 50)}…`).toBe(false);
}

async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function setUp(secrets: "accept" | "refuse" | "error" | "unreachable"): Promise<{ proxy: RunningProxy; connection: MultiplexedConnection; program?: TestProgram }> {
  let appPort: number;
  let program: TestProgram | undefined;
  if (secrets === "unreachable") appPort = await deadPort();
  else {
    program = await startTestProgram({ secrets });
    programs.push(program);
    appPort = program.port;
  }
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort, log: (line) => output.push(line) });
  proxies.push(proxy);
  const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`);
  connections.push(connection);
  if (secrets !== "unreachable") await connection.beginTools({ arguments: {} });
  return { proxy, connection, program };
}

describe("secret values stay out of every output", () => {
  it("a refused feed, a program that errors, an unreachable program: typed errors that quote no value, logs that name none", async () => {
    for (const how of ["refuse", "error"] as const) {
      const { connection, program } = await setUp(how);
      const error = await connection.feedSecrets(SECRETS).then(() => undefined, (problem: unknown) => problem);
      expect(error).toMatchObject({ name: "ContainerError", variant: "Refused" });
      record(error);
      // The values did reach the program: this is the one place they belong.
      expect(program!.feeds.join("")).toContain(SECRETS.API_KEY);
    }
    // Unreachable: the begin fails first; feed anyway on a fresh proxy whose program vanished after the begin.
    const program = await startTestProgram();
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: program.port, log: (line) => output.push(line) });
    proxies.push(proxy);
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`);
    connections.push(connection);
    await connection.beginTools({ arguments: {} });
    await program.close();
    const error = await connection.feedSecrets(SECRETS).then(() => undefined, (problem: unknown) => problem);
    expect(error).toMatchObject({ variant: "Refused" });
    record(error);
    expect(output.some((line) => line.includes("feeding 3 secret(s)"))).toBe(true);
    expectNoSecret(output);
  });

  it("a malformed feed (broken JSON, a value not a string) is finished bare and logged without its bytes", async () => {
    const { proxy, connection } = await setUp("accept");
    const scope = (connection as unknown as { beginScope: number }).beginScope;
    const body = JSON.stringify(SECRETS);
    for (const broken of [body.slice(0, -2), body.replace('"sk-', "sk-"), `{"API_KEY":${JSON.stringify(SECRETS.API_KEY)},"N":5}`, `${body} trailing ${SECRETS.TOKEN}`]) {
      const served = await new Promise<boolean>((resolve) => {
        connection.frames.mux.openChannel(scope, Buffer.concat([Buffer.from([8]), Buffer.from(broken)]), { response: () => {}, finish: resolve, lost: () => resolve(true) });
      });
      expect(served).toBe(false);
    }
    expect(proxy.multiplexed.connection!.disregarded.length).toBe(0);
    // The client refuses to encode a value that is not a string; its error quotes none of the others.
    const error = await connection.feedSecrets({ ...SECRETS, BAD: 5 as unknown as string }).then(() => undefined, (problem: unknown) => problem);
    expect(error).toBeInstanceOf(Error);
    record(error);
    expectNoSecret(output);
  });

  it("MCP errors while secrets are set, on both transports, and a connection lost mid-feed", async () => {
    const { proxy, connection } = await setUp("accept");
    await connection.feedSecrets(SECRETS);
    for (const params of [{ name: "fail", arguments: { text: "tool trouble" } }, { name: "no-such-tool" }, { name: "big", arguments: { bytes: "not a number" } }]) {
      const outcome = await connection.mcp.callTool(params as never).then((result) => result, (problem: unknown) => problem);
      record(outcome);
      output.push(JSON.stringify(outcome));
    }
    // The outward side: exchanges the provider declines or breaks, with the proxy logging.
    const unanswered = proxy.mcp.callTool({ name: "outward" }).catch((problem: unknown) => problem);
    await proxy.close();
    record(await unanswered);
    // Lost mid-feed: the connection ends while the program holds the feed.
    const slow = await startTestProgram();
    programs.push(slow);
    const proxy2 = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: slow.port, log: (line) => output.push(line) });
    proxies.push(proxy2);
    const connection2 = await openContainer(`ws://127.0.0.1:${proxy2.port}/`);
    await connection2.beginTools({ arguments: {} });
    const feed = connection2.feedSecrets(SECRETS).then(() => undefined, (problem: unknown) => problem);
    (connection2.frames.socket as unknown as { terminate(): void }).terminate();
    const lost = await feed;
    if (lost) record(lost);
    expectNoSecret(output);
  });

  it("diverge-proxy (every log line on stderr) and diverge tools --secret-env, as processes, through every failure", async () => {
    const proxyCli = fileURLToPath(new URL("../../server/dist/cli.js", import.meta.url));
    const divergeCli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
    const run = (cli: string, args: string[], env: Record<string, string> = {}) => {
      const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
      let text = "";
      child.stdout.on("data", (chunk: Buffer) => (text += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (text += chunk.toString()));
      const firstLine = new Promise<string>((resolve) => child.stdout.on("data", () => resolve(text)));
      const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
      return { child, firstLine, exited, text: () => text };
    };
    const env = Object.fromEntries(Object.entries(SECRETS));
    const secretFlags = Object.keys(SECRETS).flatMap((name) => ["--secret-env", name]);
    const cases: { program: "accept" | "refuse" | "error" | "unreachable"; call: string[] }[] = [
      { program: "refuse", call: ["call", "echo"] },
      { program: "error", call: ["call", "echo"] },
      { program: "unreachable", call: ["call", "echo"] },
      { program: "accept", call: ["call", "fail", '{"text":"tool trouble"}'] },
      { program: "accept", call: ["call", "no-such-tool"] },
      { program: "accept", call: ["read", "test://missing"] },
    ];
    for (const { program: how, call } of cases) {
      let appPort: number;
      if (how === "unreachable") appPort = await deadPort();
      else {
        const program = await startTestProgram({ secrets: how });
        programs.push(program);
        appPort = program.port;
      }
      const proxy = run(proxyCli, ["--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(appPort)]);
      const line = await proxy.firstLine;
      const port = /ws:\/\/127\.0\.0\.1:(\d+)/.exec(line)![1]!;
      const provider = run(divergeCli, ["tools", ...call, "--proxy", `ws://127.0.0.1:${port}/`, "--arguments", "{}", ...secretFlags], env);
      const code = await provider.exited;
      proxy.child.kill("SIGTERM");
      await proxy.exited;
      output.push(proxy.text(), provider.text());
      if (how !== "accept" || call[1] === "fail" || call[1] === "no-such-tool") expect(provider.text().length).toBeGreaterThan(0);
      expect(typeof code).toBe("number");
    }
    expect(output.some((text) => text.includes("feeding 3 secret(s)"))).toBe(true);
    expectNoSecret(output);
  }, 120_000);
});
