// The vault and command part of `pnpm demo` (issue 15): a program inside the container stores,
// reads, locks and unlocks a vault key and runs a command through the proxy's program API, on both
// transports where each exists: vault on /requests (kinds 5-9) and, once a provider has begun tools
// on /, on the begin scope (proxy-opened channels 2-6); command on /requests only (kind 10).
// The provider's vault is PostgresVault on embedded PGlite; its commands run a real executable.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commandExec, connectProxy, openContainer, PostgresVault, type ProxyHandlers } from "@diverge/client";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";

function show(label: string, value: unknown): void {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).replace(/\s+/g, " ");
  process.stdout.write(`  ${label.padEnd(22)} ${text.length > 150 ? `${text.slice(0, 147)}...` : text}\n`);
}

/** The executable each command runs: upper-cases the words of the command, one line (one item) each. */
const SHOUT = "let s='';process.stdin.setEncoding('utf8').on('data',(d)=>s+=d).on('end',()=>{for(const w of s.split(/\\s+/).filter(Boolean))console.log(w.toUpperCase())})";

/** Each vault handler, telling which transport asked it. */
function traced(transport: string, handlers: ReturnType<PostgresVault["handlers"]>): ProxyHandlers {
  const out: Record<string, unknown> = {};
  for (const [name, handler] of Object.entries(handlers)) {
    out[name] = (ask: never, context: never) => {
      show(`  provider (${transport})`, `${name} ${JSON.stringify((ask as { key: string }).key)}`);
      return (handler as (ask: never, context: never) => unknown)(ask, context);
    };
  }
  return out as ProxyHandlers;
}

export async function runVaultDemo(): Promise<void> {
  process.stdout.write("\nVault and command: the program's /vault/<key> and /command (issue 15)\n");
  const dir = mkdtempSync(join(tmpdir(), "diverge-demo-vault-"));
  const vault = PostgresVault.embedded(dir, { namespace: "demo", holder: "the-demo-container" });
  show("vault", `PostgresVault on embedded PGlite in ${dir}`);
  const app = await startExampleContainer();
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false });
  const base = `http://127.0.0.1:${proxy.programPort}`;
  show("program API", `${base}/vault/<key>, ${base}/command`);
  const provider = connectProxy(`ws://127.0.0.1:${proxy.port}`, { ...traced("/requests", vault.handlers()), command: commandExec(process.execPath, ["-e", SHOUT]) });
  await provider.whenConnected();
  show("provider", "holds /requests: vault asks and commands (node -e <upper-case each word>)");

  const call = async (method: string, path: string, body?: string): Promise<string> => {
    const response = await fetch(`${base}${path}`, { method, body });
    const text = await response.text();
    return `${response.status}${text ? ` ${JSON.stringify(text)}` : ""}`;
  };
  const step = async (method: string, path: string, body?: string) => {
    show(`program: ${method}`, `${path}${body !== undefined ? ` body ${JSON.stringify(body)}` : ""}`);
    show("  → answer", await call(method, path, body));
  };
  let container: Awaited<ReturnType<typeof openContainer>> | undefined;
  try {
    process.stdout.write("  -- on /requests (no provider has begun tools on /)\n");
    await step("PUT", "/vault/greeting", "hello from the program");
    await step("GET", "/vault/greeting");
    await step("GET", "/vault/missing");
    await step("POST", "/vault/greeting/lock?ttl=30");
    // The holder is the container: its own second lock refreshes the time and is answered at once.
    show("program: POST", "/vault/greeting/lock?ttl=30 (again, while held: refreshed at once)");
    show("  → answer", await call("POST", "/vault/greeting/lock?ttl=30"));
    await step("POST", "/vault/greeting/unlock");
    await step("POST", "/vault/greeting/unlock");

    show("program: POST", '/command body "store read lock unlock"');
    const response = await fetch(`${base}/command`, { method: "POST", body: "store read lock unlock" });
    const lines = (await response.text()).trim().split("\n");
    for (const line of lines) {
      const parsed = JSON.parse(line) as { item?: string; end?: string };
      show("  → line", parsed.item !== undefined ? `${line}  (item ${JSON.stringify(Buffer.from(parsed.item, "base64").toString())})` : line);
    }

    process.stdout.write("  -- on the begin scope (a provider has begun tools on /)\n");
    container = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { handlers: traced("begin scope", vault.handlers()) });
    await container.beginTools({ arguments: { greeting: "Hello" } });
    show("provider", "opened / and began tools: vault asks now go on proxy-opened channels");
    await step("GET", "/vault/greeting");
    await step("PUT", "/vault/greeting", "hello again, over the begin scope");
    await step("GET", "/vault/greeting");
    await step("POST", "/vault/greeting/lock?ttl=0");
    await step("POST", "/vault/greeting/lock?ttl=30");
    await step("POST", "/vault/greeting/unlock");
    await step("DELETE", "/vault/greeting");
    await step("GET", "/vault/greeting");
    show("program: POST", '/command body "still on requests" (command has no begin-scope channel)');
    const again = await fetch(`${base}/command`, { method: "POST", body: "still on requests" });
    show("  → lines", (await again.text()).trim().split("\n").length + " (3 items and the end)");
  } finally {
    container?.close();
    await provider.close();
    await proxy.close();
    await app.close();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
