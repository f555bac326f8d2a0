// `diverge connect --log-format json`, the real CLI, with outside text reaching its log: an agent
// calls tools through --serve-tools by names it chooses, the container's MCP server answers "not
// found" quoting each name, and diverge connect logs that answer. A name holding the secret (given
// with --secret-env) in any form it can take — raw, JSON-escaped, percent-encoded, base64 — never
// reaches stderr in any form; a name holding a newline and a JSON object stays inside one field.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
/** A quote, a backslash, a space, a non-ASCII letter and a percent: each escaped by some encoder. */
const SECRET = 'k3y"w\\örd %2F-9a7e';
const FORGED = 'evil\n{"level":"error","event":"forged","message":"the proxy is compromised"}';

/** The secret as each encoder writes it, and as longer texts carry it (a Basic header, a query string, JSON in JSON). */
function secretForms(secret: string): Record<string, string> {
  const json = (text: string) => JSON.stringify(text).slice(1, -1);
  const asciiJson = (text: string) => json(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  const base64 = Buffer.from(secret).toString("base64");
  return {
    raw: secret,
    json: json(secret),
    jsonTwice: json(json(secret)),
    asciiJson: asciiJson(secret),
    asciiJsonUpper: asciiJson(secret).replace(/\\u([0-9a-f]{4})/g, (_, hex: string) => `\\u${hex.toUpperCase()}`),
    uriComponent: encodeURIComponent(secret),
    uriComponentLower: encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    uri: encodeURI(secret),
    base64,
    base64Unpadded: base64.replace(/=+$/, ""),
    base64url: Buffer.from(secret).toString("base64url"),
  };
}

/** Every base64 (or base64url) run of `text`, decoded at each of its 4 alignments. */
function base64Decodings(text: string): Buffer[] {
  const runs = text.match(/[A-Za-z0-9+/_-]{4,}=*/g) ?? [];
  return runs.flatMap((run) => [0, 1, 2, 3].map((offset) => Buffer.from(run.slice(offset).replace(/-/g, "+").replace(/_/g, "/"), "base64")));
}

/** The strings of a parsed line (its values, and its keys), each as JSON decoded it. */
function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.entries(value).flatMap(([key, item]) => [key, ...strings(item)]);
  return [];
}

describe("diverge connect --log-format json, outside text in its lines", () => {
  it("writes no form of a secret, and a name with a newline and a JSON object stays in one field of one line", { timeout: 120_000 }, async () => {
    const app = await startExampleContainer();
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
    const child = spawn(process.execPath, [cli, "connect", "--proxy", `ws://127.0.0.1:${proxy.port}`, "--secret-env", "API_KEY", "--arguments", `{"greeting":"Hi"}`, "--serve-tools", "127.0.0.1:0", "--log-format", "json"], {
      env: { ...process.env, API_KEY: SECRET },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    const servingAt = new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        const found = /serving the container's tools at (http:\/\/[^\s"]+)/.exec(stderr);
        if (found) resolve(found[1]!);
      });
      child.once("exit", (code) => reject(new Error(`diverge connect exited with ${code}: ${stderr}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    const forms = secretForms(SECRET);
    const names = [
      ...Object.values(forms).map((form) => `tool-${form}`),
      // The forms as longer texts hold them: a Basic header (base64 of user:secret, any alignment), a URL, JSON.
      `Basic ${Buffer.from(`user:${SECRET}`).toString("base64")}`,
      `Basic ${Buffer.from(`u:${SECRET}`).toString("base64")}`,
      `Basic ${Buffer.from(`usr:${SECRET}`).toString("base64")}`,
      `https://example.test/?token=${encodeURIComponent(SECRET)}&next=1`,
      `{"token":${JSON.stringify(SECRET)}}`,
      FORGED,
    ];
    const client = new Client({ name: "connect-logs-test", version: "1.0.0" });
    try {
      const url = await servingAt;
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      for (const name of names) await client.callTool({ name, arguments: {} }).catch(() => undefined);
      // Each call's line written before the stop: the last name's line is there once the forged name's is.
      await new Promise<void>((resolve, reject) => {
        const deadline = Date.now() + 90_000;
        const check = () => (stderr.includes("forged") ? resolve() : Date.now() > deadline ? reject(new Error(`no line of the last call: ${stderr}`)) : setTimeout(check, 20));
        check();
      });
    } finally {
      await client.close().catch(() => {});
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    await proxy.close();
    await app.close();

    const lines = stderr.split("\n").filter((line) => line.length > 0);
    if (process.env.SHOW_LOG) console.log(stderr);
    const objects = lines.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
    for (const object of objects) expect(Object.keys(object).slice(0, 3)).toEqual(["time", "level", "event"]);
    // Every call was logged (its "not found" answer), the secret's in a field redacted.
    expect(objects.filter((object) => strings(object).some((text) => text.includes("tool-"))).length).toBeGreaterThanOrEqual(Object.keys(forms).length);
    expect(stderr).toContain("[redacted]");
    // No form of the secret, in the lines as written or in any string they decode to.
    const secretBytes = Buffer.from(SECRET);
    for (const [form, text] of Object.entries(forms)) {
      expect(stderr, `the ${form} form`).not.toContain(text);
      for (const object of objects) for (const value of strings(object)) expect(value, `the ${form} form, decoded`).not.toContain(text);
    }
    for (const decoded of base64Decodings(stderr)) expect(decoded.includes(secretBytes), "a base64 run of the log decodes to the secret").toBe(false);
    // The forged name: in one line, whole, inside one field; no line of its making.
    const forged = objects.filter((object) => JSON.stringify(object).includes("forged"));
    expect(forged).toHaveLength(1);
    expect(forged[0]!.event).not.toBe("forged");
    expect(Object.values(forged[0]!).some((value) => typeof value === "string" && value.includes(FORGED))).toBe(true);
    expect(forged[0]!.message).not.toContain("forged");
    expect(objects.some((object) => object.message === "the proxy is compromised")).toBe(false);
  });
});
