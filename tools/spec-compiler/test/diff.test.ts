// The evolution checker on the three fixture revisions, through the library and through the CLI.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { diffRevisions, formatEvolution, loadRevisionArg } from "../src/diff.js";
import { materialize, repoRoot, removeTempDirs, tempDir } from "./fixtures/materialize.js";

afterAll(removeTempDirs);

const cli = join(repoRoot, "tools", "spec-compiler", "dist", "cli.js");
const base = () => loadRevisionArg(repoRoot, "2.3.0");

function run(args: string[]) {
  const r = spawnSync(process.execPath, [cli, ...args, "--root", repoRoot], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("diverge-spec diff on the fixture revisions", () => {
  it("classifies a new tag 9 on the tools-begin client channel request as additive, a minor bump", () => {
    const e = diffRevisions(base(), loadRevisionArg(repoRoot, materialize("add-tag")));
    expect(e.ok).toBe(true);
    expect(e.level).toBe("additive");
    expect(e.bump).toBe("minor");
    const notEditorial = e.changes.filter((c) => c.class !== "editorial");
    expect(notEditorial).toEqual([
      { class: "additive", area: "tag", subject: "tools-begin/client/channel-request", tag: 9, sentence: "tools-begin/client/channel-request: new tag 9 (McpListPrompts)." },
      { class: "additive", area: "channel", subject: "tools-begin/channels", sentence: "tools-begin/channels: channel 9 the provider opens is described (mcp/list-tools/answer, one, a bare finish means notServed)." },
    ]);
    // The unknown-tag example moved from 9 to 10, and one example was added: editorial only.
    expect(e.changes.filter((c) => c.class === "editorial").map((c) => c.sentence)).toEqual([
      "tools-begin/client/channel-request: examples (2 added, 1 removed) changed.",
    ]);
  });

  it("fails a reused tag with a sentence naming the frame, the tag and both meanings", () => {
    const e = diffRevisions(base(), loadRevisionArg(repoRoot, materialize("reuse-tag")));
    expect(e.ok).toBe(false);
    expect(e.level).toBe("forbidden");
    expect(e.bump).toBeUndefined();
    const forbidden = e.changes.filter((c) => c.class === "forbidden");
    expect(forbidden).toHaveLength(1);
    expect(forbidden[0]!.sentence).toMatch(/^tools-begin\/client\/channel-request: tag 8 meant Secrets in 2\.3\.0 and means Vault in 2\.4\.0/);
    expect(formatEvolution(e)).toContain("FAIL: 1 forbidden change(s)");
  });

  it("flags a changed error text as forbidden, quoting both texts", () => {
    const e = diffRevisions(base(), loadRevisionArg(repoRoot, materialize("error-text")));
    expect(e.ok).toBe(false);
    const forbidden = e.changes.filter((c) => c.class === "forbidden");
    expect(forbidden.map((c) => c.sentence)).toEqual([
      'tools-begin/client/channel-request/error: error Secrets read "secrets feed did not parse: {reason}" in 2.3.0 and reads "secret values did not parse: {reason}" in 2.4.0; an error text never changes in place (peers and tests match it exactly).',
    ]);
  });

  it("exits 1 on a forbidden change and names it on stderr; --json carries the same changes", () => {
    const dir = materialize("reuse-tag");
    const text = run(["diff", "2.3.0", dir]);
    expect(text.status).toBe(1);
    expect(text.stdout).toContain("forbidden:\n  tools-begin/client/channel-request: tag 8 meant Secrets in 2.3.0 and means Vault in 2.4.0");
    expect(text.stderr).toContain("forbidden: tools-begin/client/channel-request: tag 8 meant Secrets in 2.3.0 and means Vault in 2.4.0");
    const json = run(["diff", "2.3.0", dir, "--json"]);
    expect(json.status).toBe(1);
    const parsed = JSON.parse(json.stdout) as { ok: boolean; level: string; changes: { class: string; tag?: number }[] };
    expect(parsed.ok).toBe(false);
    expect(parsed.level).toBe("forbidden");
    expect(parsed.changes.find((c) => c.class === "forbidden")?.tag).toBe(8);
  });

  it("exits 0 on the additive fixture and prints the change", () => {
    const r = run(["diff", "2.3.0", materialize("add-tag")]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("additive:\n  tools-begin/client/channel-request: new tag 9 (McpListPrompts).");
    expect(r.stdout).toContain("OK: release as a minor bump.");
  });
});

describe("the classes of the other changes", () => {
  /** spec/2.3.0 with edits, as revision `to`. */
  function edited(to: string, edits: [file: string, find: string, replace: string][]) {
    const dir = join(tempDir("diverge-diff-"), to);
    cpSync(join(repoRoot, "spec", "2.3.0"), dir, { recursive: true });
    edits.push(["revision.yaml", "revision: 2.3.0\n", `revision: ${to}\n`]);
    for (const [file, find, replace] of edits) {
      const path = join(dir, file);
      const text = readFileSync(path, "utf8");
      expect(text.split(find).length - 1, `${file}: ${find}`).toBe(1);
      writeFileSync(path, text.replace(find, () => replace));
    }
    return diffRevisions(base(), loadRevisionArg(repoRoot, dir));
  }
  const sentences = (e: ReturnType<typeof edited>, cls: string) => e.changes.filter((c) => c.class === cls).map((c) => c.sentence);

  it("a renumbered tag is forbidden", () => {
    const e = edited("2.4.0", [
      ["tools-begin.yaml", "        - tag: 8\n          name: Secrets\n", "        - tag: 9\n          name: Secrets\n"],
      ["tools-begin-channels.yaml", "opener: provider, tag: 8,", "opener: provider, tag: 9,"],
    ]);
    expect(sentences(e, "forbidden")).toEqual([
      "tools-begin/client/channel-request: Secrets was tag 8 in 2.3.0 and is tag 9 in 2.4.0; a listed tag is never renumbered.",
    ]);
  });

  it("a removed kind is forbidden, and its exchange is gone", () => {
    const requests = readFileSync(join(repoRoot, "spec", "2.3.0", "requests.yaml"), "utf8");
    const start = requests.indexOf("        - tag: 10\n          name: Command\n");
    expect(start).toBeGreaterThan(0);
    const end = requests.indexOf("                doc: The command, opaque, possibly empty.\n", start) + "                doc: The command, opaque, possibly empty.\n".length;
    // The kind's exchange goes with it, or the spec would name an answer for a kind that is gone.
    const command = readFileSync(join(repoRoot, "spec", "2.3.0", "command.yaml"), "utf8");
    const e = edited("3.0.0", [
      ["requests.yaml", requests.slice(start, end), ""],
      ["command.yaml", command.slice(command.indexOf("exchanges:\n")), ""],
    ]);
    expect(sentences(e, "forbidden")).toEqual([
      "proxy/requests/ask: kind 10 meant Command in 2.3.0 and is gone in 3.0.0; a listed kind is never removed (a peer at 2.3.0 still sends it).",
    ]);
  });

  it("a width changed in place is forbidden", () => {
    const e = edited("2.4.0", [["tools-begin.yaml", "        - name: tag\n          type: u8\n          doc: Which ask this is.\n      truncated: Empty\n    switch:\n      on: tag\n      property: variant\n      unknown: UnknownTag\n      variants:\n        - tag: 0\n          name: Postgres\n          doc: >-\n            The provider's half", "        - name: tag\n          type: u16\n          doc: Which ask this is.\n      truncated: Empty\n    switch:\n      on: tag\n      property: variant\n      unknown: UnknownTag\n      variants:\n        - tag: 0\n          name: Postgres\n          doc: >-\n            The provider's half"]]);
    expect(sentences(e, "forbidden")).toEqual([
      "tools-begin/client/channel-request: the header was [tag: u8] in 2.3.0 and is [tag: u16] in 2.4.0; a layout or width never changes in place.",
    ]);
  });

  it("a new kind with its exchange is additive; a patch revision for it is a problem", () => {
    const kind = [
      "        - tag: 200",
      "          name: McpListPrompts",
      "          doc: The program made a `prompts/list` of the proxy.",
      "          answer: mcp-list-prompts",
      "          body:",
      "            fields:",
      "              - name: params",
      "                type: json",
      "                schema: { mcp: PaginatedRequestParams, nullable: true }",
      "                invalid: Mcp",
      "                doc: The params as JSON, or `null` for none.",
      "",
    ].join("\n");
    const exchange = [
      "  - id: mcp-list-prompts",
      "    kind: 200",
      "    ask: list prompts",
      "    askFrame: proxy/requests/ask",
      "    payload: the params as JSON",
      "    path: /mcp/list-prompts/{channel}",
      "    answer:",
      "      frame: mcp/list-tools/answer",
      "      messages: one",
      "    unanswered: askedAgain",
      "    notServed: neverAskedAgain",
      "",
    ].join("\n");
    const edits: [string, string, string][] = [
      ["requests.yaml", "        - tag: 10\n          name: Command\n", `${kind}        - tag: 10\n          name: Command\n`],
      ["exchanges.yaml", "exchanges:\n", `exchanges:\n${exchange}`],
    ];
    const e = edited("2.3.1", edits);
    expect(sentences(e, "forbidden")).toEqual([]);
    expect(sentences(e, "additive")).toEqual([
      "proxy/requests/ask: new kind 200 (McpListPrompts).",
      "new exchange mcp-list-prompts: kind 200 of proxy/requests/ask, answered on /mcp/list-prompts/{channel} with mcp/list-tools/answer.",
    ]);
    expect(e.ok).toBe(false);
    expect(e.problems).toEqual([
      "2.3.0 → 2.3.1 is a patch step, but the changes are additive and need a minor one: name the new revision 2.4.0 (or higher) so the packages' versions follow it.",
    ]);
  });

  it("a standing stream's rule changed is breaking", () => {
    const e = edited("3.0.0", [["exchanges.yaml", "after: [mcp-list-tools, mcp-list-resources, mcp-call-tool, mcp-read-resource]", "after: [mcp-call-tool]"]]);
    expect(sentences(e, "breaking")).toEqual([
      "exchange mcp-notifications (kind 4): a standing stream was asked after mcp-list-tools, mcp-list-resources, mcp-call-tool, mcp-read-resource, again on nextConnection in 2.3.0 and is asked after mcp-call-tool, again on nextConnection in 3.0.0.",
    ]);
  });

  it("a renamed field is breaking, a major bump", () => {
    const e = edited("3.0.0", [["tools-begin.yaml", "              - name: values\n", "              - name: secrets\n"]]);
    expect(sentences(e, "breaking")).toEqual([
      "tools-begin/client/channel-request: tag 8 (Secrets): its fields were named values in 2.3.0 and are named secrets in 3.0.0.",
    ]);
    expect(e.ok).toBe(true);
    expect(e.bump).toBe("major");
  });

  it("a doc change alone is editorial: a patch, or the revision step when that is larger", () => {
    const doc: [string, string, string] = ["frames.yaml", "        doc: Fewer than nine bytes, so not even the header.\n", "        doc: Fewer than nine bytes.\n"];
    const major = edited("3.0.0", [doc]);
    expect(major.level).toBe("editorial");
    expect(major.needs).toBe("patch");
    expect(major.bump).toBe("major"); // the revision step wins, so the packages land on 3.0.0
    const patch = edited("2.3.1", [doc]);
    expect(patch.ok).toBe(true);
    expect(patch.bump).toBe("patch");
  });
});

describe("the exports map of @diverge/codec is generated", () => {
  it("lists ./2.3.0 for spec/2.3.0 today", () => {
    const manifest = JSON.parse(readFileSync(join(repoRoot, "packages", "codec", "package.json"), "utf8")) as { exports: Record<string, unknown> };
    expect(manifest.exports["./2.3.0"]).toEqual({ types: "./dist/gen/2.3.0/index.d.ts", default: "./dist/gen/2.3.0/index.js" });
  });

  it("passes a revision's name or a folder to the CLI alike", () => {
    const dir = join(tempDir("diverge-diff-"), "2.3.1");
    cpSync(join(repoRoot, "spec", "2.3.0"), dir, { recursive: true });
    const revision = join(dir, "revision.yaml");
    writeFileSync(revision, readFileSync(revision, "utf8").replace("revision: 2.3.0\n", "revision: 2.3.1\n"));
    const out = execFileSync(process.execPath, [cli, "diff", "2.3.0", dir, "--json", "--root", repoRoot], { encoding: "utf8" });
    expect(JSON.parse(out)).toMatchObject({ from: "2.3.0", to: "2.3.1", changes: [], ok: true, bump: "patch" });
  });
});
