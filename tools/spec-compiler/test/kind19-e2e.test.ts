// The proof that the exchange layer is generated: on a temporary copy of the repository, a text edit
// of the spec adds exchange kind 19 with an answer frame of its own; `generate` writes the codec and
// both packages' typed surfaces; codec, multiplexer, server and client build; and a program typed
// against the built packages drives kind 19 over real sockets, a handler on the provider's side and
// the generated ask on the proxy's. Nothing hand-written is edited. `diverge-spec diff` calls the
// change additive.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GENERATED_DIRS } from "../src/generate.js";
import { repoRoot } from "./fixtures/materialize.js";
import { copyRepository, run } from "./repo-copy.js";

const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");

/** The text edits that add kind 19: a variant of the ask, and the unknown-kind example moves to 20. */
const ASK_EDITS: [find: string, replace: string][] = [
  [
    "        - tag: 18\n          name: FuseStat\n",
    "        - tag: 19\n          name: Echo\n          doc: Echo the bytes back.\n          answer: echo\n          body:\n            fields:\n              - name: data\n                type: bytes\n                length: rest\n                doc: The bytes to echo.\n        - tag: 18\n          name: FuseStat\n",
  ],
  [
    '      - name: kind 19\n        hex: "00000001 13"\n        error: { variant: UnknownKind, message: "unknown request kind 19" }\n',
    '      - name: kind 20\n        hex: "00000001 14"\n        error: { variant: UnknownKind, message: "unknown request kind 20" }\n      - name: an echo\n        hex: "00000001 13 6869"\n        value: { channel: 1, kind: Echo, data: "6869" }\n',
  ],
];

/** A new file of the revision: the answer frame of kind 19 and the exchange itself. */
const ECHO_YAML = `frames:
  - id: echo/answer
    name: EchoAnswer
    title: echo answer
    doc: The one message that answers an echo.
    error: echo/answer/error
    header:
      fields:
        - name: tag
          type: u8
          doc: Echoed.
      truncated: Empty
    switch:
      on: tag
      property: variant
      unknown: UnknownTag
      variants:
        - tag: 0
          name: Echoed
          doc: The bytes, back.
          body:
            fields:
              - name: data
                type: bytes
                length: rest
                doc: The bytes.
    examples:
      - name: hi
        hex: "00 6869"
        value: { variant: Echoed, data: "6869" }
      - name: empty
        hex: ""
        error: { variant: Empty, message: "echo answer is empty" }
      - name: tag 1
        hex: "01"
        error: { variant: UnknownTag, message: "unknown echo answer tag 1" }
errorTypes:
  - id: echo/answer/error
    name: EchoAnswerError
    doc: An echo answer that could not be read.
    variants:
      - name: Empty
        doc: No bytes.
        message: "echo answer is empty"
      - name: UnknownTag
        doc: A tag that is not the frame's.
        fields:
          - name: tag
            type: u8
            doc: The tag as read.
        message: "unknown echo answer tag {tag}"
exchanges:
  - id: echo
    kind: 19
    ask: echo
    askFrame: proxy/requests/ask
    payload: the bytes to echo
    path: /echo/{channel}
    answer:
      frame: echo/answer
      messages: one
    unanswered: neverAskedAgain
    notServed: neverAskedAgain
`;

function addKind19(specDir: string, revision?: string): void {
  const requests = join(specDir, "requests.yaml");
  let text = readFileSync(requests, "utf8");
  for (const [find, replace] of ASK_EDITS) {
    expect(text.split(find).length - 1, find).toBe(1);
    text = text.replace(find, () => replace);
  }
  writeFileSync(requests, text);
  writeFileSync(join(specDir, "echo.yaml"), ECHO_YAML);
  if (revision) {
    const file = join(specDir, "revision.yaml");
    writeFileSync(file, readFileSync(file, "utf8").replace(/^revision: .*$/m, `revision: ${revision}`));
  }
}

/** The program: typed against the built packages, so a missing `echo` member fails its compile. */
const DRIVE_TS = `import { startProxy } from "@diverge/server";
import { connectProxy, type ProviderHandlers } from "@diverge/client";

const handlers: ProviderHandlers = {
  echo: async ({ data }, context) => ({ variant: "Echoed", data: new Uint8Array([...data, ...new TextEncoder().encode(" via " + context.path.split("/")[1])]) }),
};
const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, log: () => {} });
const connection = connectProxy(\`ws://127.0.0.1:\${proxy.port}\`, handlers, { minBackoffMs: 10, maxBackoffMs: 50 });
const answered = await proxy.paths.asks.echo({ data: new TextEncoder().encode("hi") });
const text = answered.type === "answered" ? new TextDecoder().decode(answered.answer.data) : answered.type;
// Without a handler the same exchange is not served.
await connection.close();
const bare = connectProxy(\`ws://127.0.0.1:\${proxy.port}\`, {}, { minBackoffMs: 10, maxBackoffMs: 50 });
const declined = await proxy.paths.asks.echo({ data: new Uint8Array(0) });
await bare.close();
await proxy.close();
process.stdout.write(JSON.stringify({ text, declined: declined.type }) + "\\n");
`;

describe("kind 19 added by a spec edit alone runs end to end", () => {
  let root: string;
  const spec = (...args: string[]) => run(root, [join(root, "tools", "spec-compiler", "dist", "cli.js"), ...args]);

  beforeAll(() => {
    root = copyRepository("diverge-kind19-e2e-");
    execFileSync("git", ["init", "-q", "-b", "main"], { cwd: root });
    writeFileSync(join(root, ".git", "info", "exclude"), "node_modules\ndist\n");
    execFileSync("git", ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty", "-m", "empty"], { cwd: root });
    execFileSync("git", ["add", "-A"], { cwd: root });
    execFileSync("git", ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "the repository as copied"], { cwd: root });
    const built = run(join(root, "tools", "spec-compiler"), [tsc, "-p", "tsconfig.build.json"]);
    expect(built.out).toBe("");
  });

  afterAll(() => {
    if (!root) return;
    if (process.env.DIVERGE_KEEP_E2E) process.stdout.write(`kept the copy at ${root}\n`);
    else rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  });

  it("diverge-spec diff calls the new kind and its answer frame additive", () => {
    const dir = join(mkdtempSync(join(tmpdir(), "diverge-kind19-diff-")), "2.4.0");
    cpSync(join(repoRoot, "spec", "2.3.0"), dir, { recursive: true });
    addKind19(dir, "2.4.0");
    const diff = run(repoRoot, [join(repoRoot, "tools", "spec-compiler", "dist", "cli.js"), "diff", "2.3.0", dir]);
    expect(diff.stderr).toBe("");
    expect(diff.status).toBe(0);
    expect(diff.stdout).toContain("proxy/requests/ask: new kind 19 (Echo).");
    expect(diff.stdout).toContain("new exchange echo: kind 19 of proxy/requests/ask, answered on /echo/{channel} with echo/answer.");
    expect(diff.stdout).toContain("OK: release as a minor bump.");
    expect(diff.stdout).not.toMatch(/^(breaking|forbidden):/m);
  });

  it("generates, builds, and drives kind 19 over real sockets with no hand-written edit", () => {
    addKind19(join(root, "spec", "2.3.0"));
    const generated = spec("generate");
    expect(generated.stderr).toBe("");
    expect(generated.status).toBe(0);
    // Only the spec and what the compiler owns changed.
    const changed = execFileSync("git", ["status", "--porcelain", "--untracked-files=all"], { cwd: root, encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map((line) => line.slice(3));
    const owned = (path: string) => path.startsWith("spec/") || GENERATED_DIRS.some((dir) => path.startsWith(`${dir}/`)) || path === "packages/codec/src/index.ts" || path === "packages/codec/src/exchanges.ts" || path === "packages/codec/package.json";
    expect(changed.filter((path) => !owned(path))).toEqual([]);
    expect(changed).toContain("packages/server/src/gen/exchanges.ts");
    expect(changed).toContain("packages/client/src/gen/exchanges.ts");
    for (const pkg of ["codec", "multiplexer", "server", "client"]) {
      const built = run(join(root, "packages", pkg), [tsc, "-p", "tsconfig.build.json"]);
      expect(built.out, pkg).toBe("");
    }
    // The program is compiled against the built packages' types, then run.
    const program = join(root, "packages", "client", "kind19");
    execFileSync("mkdir", ["-p", program]);
    writeFileSync(join(program, "drive.mts"), DRIVE_TS);
    writeFileSync(
      join(program, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, skipLibCheck: true, types: ["node"], rootDir: ".", outDir: "out" }, files: ["drive.mts"] }),
    );
    const compiled = run(program, [tsc, "-p", "tsconfig.json"]);
    expect(compiled.out).toBe("");
    const driven = run(program, [join(program, "out", "drive.mjs")]);
    expect(driven.stderr).toBe("");
    expect(JSON.parse(driven.stdout)).toEqual({ text: "hi via echo", declined: "notServed" });
  });
});
