// `diverge-proxy --log-format json`, the real CLI, with outside text reaching its log: a provider
// (the built @diverge/client) feeds a secret, then mounts directories (real FUSE mounts) at names it
// chooses, and the proxy logs each mount with its path. A name holding the secret in any form —
// raw, JSON-escaped, percent-encoded, base64url — never reaches stderr in any form (the proxy
// redacts what it was fed); a name holding a newline and a JSON object stays inside one field.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { startExampleContainer } from "@diverge/example-container";
import { fuseUnavailable } from "../src/families/fuse/index.js";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(packageDir, "dist", "cli.js");
const clientEntry = join(packageDir, "..", "client", "dist", "index.js");
const SECRET = 'k3y"w\\örd %2F-9a7e';
const FORGED = 'evil\n{"level":"error","event":"forged","message":"the proxy is compromised"}';

interface Connection {
  beginTools(args: unknown): Promise<unknown[]>;
  feedSecrets(secrets: Record<string, string>): Promise<void>;
  mount(path: readonly string[], target: string, options: { kind: "directory" }): Promise<{ close?(): Promise<void> }>;
  close(): void;
}

const json = (text: string) => JSON.stringify(text).slice(1, -1);
/** The secret as each encoder writes it (a mount name holds no `/`: base64url, not base64). */
const forms: Record<string, string> = {
  raw: SECRET,
  json: json(SECRET),
  jsonTwice: json(json(SECRET)),
  asciiJson: json(SECRET).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
  uriComponent: encodeURIComponent(SECRET),
  uriComponentLower: encodeURIComponent(SECRET).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
  base64url: Buffer.from(SECRET).toString("base64url"),
  base64: Buffer.from(SECRET).toString("base64"),
};

function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.entries(value).flatMap(([key, item]) => [key, ...strings(item)]);
  return [];
}

const unavailable = fuseUnavailable();

describe.skipIf(!!unavailable)("diverge-proxy --log-format json, outside text in its lines", () => {
  it("writes no form of a fed secret, and a mount name with a newline and a JSON object stays in one field of one line", { timeout: 120_000 }, async () => {
    const root = mkdtempSync(join(tmpdir(), "diverge-logs-root-"));
    const served = mkdtempSync(join(tmpdir(), "diverge-logs-served-"));
    const container = await startExampleContainer({ host: "127.0.0.1" });
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", "0", "--program-port", "0", "--pg-port", "0", "--app-port", String(container.port), "--root", root, "--log-format", "json"], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    const names = [...Object.values(forms).filter((form) => !form.includes("/")).map((form) => `m-${form}`), FORGED];
    let connection: Connection | undefined;
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const deadline = Date.now() + 90_000;
        const check = () => {
          const found = /ws:\/\/127\.0\.0\.1:(\d+)/.exec(stdout);
          if (found) resolve(Number(found[1]));
          else if (Date.now() > deadline) reject(new Error(`no listening line: ${stdout}${stderr}`));
          else setTimeout(check, 20);
        };
        check();
      });
      const client = (await import(pathToFileURL(clientEntry).href)) as { openContainer(url: string): Promise<Connection> };
      connection = await client.openContainer(`ws://127.0.0.1:${port}/`);
      await connection.beginTools({ arguments: { greeting: "Hi" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
      await connection.feedSecrets({ API_KEY: SECRET });
      for (const name of names) await connection.mount([name], served, { kind: "directory" });
      // Each mount's line is written before the stop: waited for, not slept on.
      await new Promise<void>((resolve, reject) => {
        const deadline = Date.now() + 90_000;
        const check = () => ((stderr.match(/"event":"mounted/g) ?? []).length >= names.length ? resolve() : Date.now() > deadline ? reject(new Error(`not every mount logged: ${stderr}`)) : setTimeout(check, 20));
        check();
      });
    } finally {
      connection?.close();
      child.kill("SIGTERM");
      await exited;
      await container.close();
    }
    expect(await exited).toBe(0);
    rmSync(root, { recursive: true, force: true });
    rmSync(served, { recursive: true, force: true });

    const objects = stderr
      .split("\n")
      .filter((line) => line.length > 0)
      .map((line) => {
        try {
          return JSON.parse(line) as Record<string, unknown>;
        } catch {
          throw new Error(`not a JSON line: ${line}`);
        }
      });
    if (process.env.SHOW_LOG) console.log(stderr);
    const mounted = objects.filter((object) => object.event === "mounted.directory.scope");
    expect(mounted).toHaveLength(names.length);
    expect(stderr).toContain("[redacted]");
    for (const [form, text] of Object.entries(forms)) {
      expect(stderr, `the ${form} form`).not.toContain(text);
      for (const object of objects) for (const value of strings(object)) expect(value, `the ${form} form, decoded`).not.toContain(text);
    }
    const forged = objects.filter((object) => JSON.stringify(object).includes("forged"));
    expect(forged).toHaveLength(1);
    expect(forged[0]).toMatchObject({ level: "info", event: "mounted.directory.scope", path: `/${FORGED}` });
    expect(forged[0]!.message).toMatch(/^mounted directory \{path\} for scope \d+$/);
    expect(objects.some((object) => object.message === "the proxy is compromised")).toBe(false);
  });
});
