// A spec with a mistake fails with file:line:column and a plain sentence, never a stack trace.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { compileRevision } from "../src/generate.js";
import { SpecErrors } from "../src/load.js";
import { cli, copyOfRepo } from "./helpers.js";

/** Edits one spec file of a fresh copy, compiles it, and returns the mistakes it reports. */
function mistakes(file: string, edit: (text: string) => string): { root: string; errors: SpecErrors } {
  const root = copyOfRepo();
  const path = join(root, "spec", "2.3.0", file);
  const before = readFileSync(path, "utf8");
  const after = edit(before);
  expect(after).not.toBe(before);
  writeFileSync(path, after);
  try {
    compileRevision(root, "2.3.0");
  } catch (error) {
    expect(error).toBeInstanceOf(SpecErrors);
    return { root, errors: error as SpecErrors };
  }
  throw new Error("the compiler accepted a spec with a mistake");
}

/** The 1-based line of the first occurrence of `needle` (after `from`) in `text`. */
function lineOf(text: string, needle: string, from = 0): number {
  const at = text.indexOf(needle, from);
  expect(at).toBeGreaterThanOrEqual(0);
  return text.slice(0, at).split("\n").length;
}

describe("spec mistakes are reported with file:line:column", () => {
  it("postcard: a reference to an undeclared type, a postcard field naming a frame that is not postcard, a postcard frame whose error lacks a postcard failure", () => {
    const messages = (file: string, edit: (text: string) => string) => mistakes(file, edit).errors.errors.map((e) => e.message);
    expect(messages("filesystem.yaml", (t) => t.replace("type: { vec: filetree/node }, doc: \"The root's", "type: { vec: filetree/nod }, doc: \"The root's"))).toContainEqual(
      expect.stringMatching(/filesystem\.yaml:\d+:\d+: postcard type `filetree\/nod` is not declared under `postcardTypes` of the revision\.$/),
    );
    expect(messages("filesystem.yaml", (t) => t.replace("postcard: filetree/frame, invalid: Filetree, doc: \"The filetree frame, postcard to the end of the payload.", "postcard: filesystem/read/request, invalid: Filetree, doc: \"The filetree frame, postcard to the end of the payload."))).toContainEqual(
      expect.stringMatching(/must name a frame whose payload is one postcard value \(`postcard:`\); `filesystem\/read\/request` is not one\.$/),
    );
    expect(messages("filesystem.yaml", (t) => t.replace("      - { name: DeserializeBadBool,", "      - { name: DeserializeBadBoolean,"))).toContainEqual(
      expect.stringMatching(/a postcard frame's error type must have variant `DeserializeBadBool`; `postcard\/error` does not\.$/),
    );
  });

  it("a field named `variant`, the member every generated union names its variant in, whatever the spec's `property`", () => {
    const messages = (file: string, edit: (text: string) => string) => mistakes(file, edit).errors.errors.map((e) => e.message);
    expect(messages("fuse.yaml", (t) => t.replace('- { name: message, type: utf8, length: rest, invalid: MessageUtf8, doc: "The reason." }', '- { name: variant, type: utf8, length: rest, invalid: MessageUtf8, doc: "The reason." }'))).toContainEqual(
      expect.stringMatching(/fuse\.yaml:\d+:\d+: field `variant` of variant `Refused` has the name of a header field or of the discriminant\.$/),
    );
    expect(messages("filesystem.yaml", (t) => t.replace(`{ name: name, type: string, doc: "The entry's name, one component." }`, `{ name: variant, type: string, doc: "The entry's name, one component." }`))).toContainEqual(
      expect.stringMatching(/filesystem\.yaml:\d+:\d+: postcard field `variant` appears twice, or has the name of the enum's discriminant\.$/),
    );
  });

  it("a list entry or an integer with a max whose error carries no value", () => {
    const { errors } = mistakes("fuse.yaml", (t) => t.replace("{ name: file_kind, type: u8, max: 1, invalid: UnknownKind, doc: \"0 a file, 1 a directory.\" }\n              - { name: size, type: u64, doc: \"Byte length; 0 for a directory.\" }\n              - { name: mode", "{ name: file_kind, type: u8, max: 1, invalid: Truncated, doc: \"0 a file, 1 a directory.\" }\n              - { name: size, type: u64, doc: \"Byte length; 0 for a directory.\" }\n              - { name: mode"));
    expect(errors.errors.map((e) => e.message)).toContainEqual(expect.stringMatching(/fuse\.yaml:\d+:\d+: `Truncated` must carry exactly one field, the value read, to be raised by `max`\.$/));
  });

  it("a duplicated tag", () => {
    const { root, errors } = mistakes("tools-begin.yaml", (t) => t.replace("        - tag: 8\n          name: Secrets", "        - tag: 7\n          name: Secrets"));
    const text = readFileSync(join(root, "spec/2.3.0/tools-begin.yaml"), "utf8");
    const line = lineOf(text, "- tag: 7\n          name: Secrets");
    const message = errors.errors.map((e) => e.message).find((m) => m.includes("tag 7"));
    expect(message).toMatch(new RegExp(`^spec/2\\.3\\.0/tools-begin\\.yaml:${line}:\\d+: tag 7 of \`tools-begin/client/channel-request\` is given to both \`McpNotifications\` and \`Secrets\`\\.$`));
  });

  it("a missing field", () => {
    const { root, errors } = mistakes("connections.yaml", (t) => t.replace("    name: DaemonRequest\n", ""));
    const text = readFileSync(join(root, "spec/2.3.0/connections.yaml"), "utf8");
    const line = lineOf(text, "- id: daemon/request");
    const [first] = errors.errors;
    expect(first!.place.file).toBe("spec/2.3.0/connections.yaml");
    expect(first!.place.line).toBe(line);
    expect(first!.sentence).toBe("`frames.1` is missing `name`.");
  });

  it("a misspelled key", () => {
    const { errors } = mistakes("connections.yaml", (t) => t.replace("      exact: Length\n    examples:\n      - name: connection 258", "      exakt: Length\n    examples:\n      - name: connection 258"));
    expect(errors.errors.some((e) => /connections\.yaml:\d+:\d+: `frames\.0\.body` has `exakt`, which the spec schema does not know/.test(e.message))).toBe(true);
  });

  it("an error variant that the frame's error type does not have", () => {
    const { errors } = mistakes("tools-begin.yaml", (t) => t.replace("invalid: Secrets", "invalid: SecretsFeed"));
    const message = errors.errors.map((e) => e.message).find((m) => m.includes("SecretsFeed"));
    expect(message).toMatch(/^spec\/2\.3\.0\/tools-begin\.yaml:\d+:\d+: field `values` names error variant `SecretsFeed`, which error type `tools-begin\/client\/channel-request\/error` does not have\.$/);
  });

  it("a message that quotes a field the variant does not carry", () => {
    const { errors } = mistakes("connections.yaml", (t) => t.replace('"postgres connection request is {length} bytes, not 4"', '"postgres connection request is {size} bytes, not 4"'));
    expect(errors.errors[0]!.sentence).toBe("message of `Length` quotes `{size}`, which is not one of its fields.");
  });

  it("a kind with no exchange, so no answer path", () => {
    const { errors } = mistakes("command.yaml", (t) => t.slice(0, t.indexOf("exchanges:\n")));
    const sentences = errors.errors.map((e) => e.sentence);
    expect(sentences).toContain("kind 10 (`Command`) of `proxy/requests/ask` has no exchange: every kind needs its answer path and answer.");
  });

  it("an answer frame no file declares, unless it is marked pending", () => {
    const { errors } = mistakes("vault.yaml", (t) => t.replace("      frame: vault/get/answer\n      messages: one\n", "      frame: vault/get/reply\n      messages: one\n"));
    expect(errors.errors.map((e) => e.sentence)).toContain(
      "exchange `vault-get` is answered with frame `vault/get/reply`, which no file of the revision declares (mark it `pending: true` if a later change declares it).",
    );
    // Marked pending, the same undeclared frame is accepted: a later change of the spec declares it.
    const root = copyOfRepo();
    const path = join(root, "spec", "2.3.0", "command.yaml");
    writeFileSync(path, readFileSync(path, "utf8").replace("      frame: command/response\n", "      frame: command/reply\n      pending: true\n"));
    const ir = compileRevision(root, "2.3.0");
    expect(ir.exchanges.find((x) => x.id === "command")).toMatchObject({ answerFrameId: undefined, pendingAnswerFrameId: "command/reply" });
  });

  it("an unknown message pattern", () => {
    const { errors } = mistakes("command.yaml", (t) => t.replace("messages: perItem", "messages: perLine"));
    expect(errors.errors.some((e) => /`exchanges\.0\.answer\.messages` must be one of `one`, `oneWhenHeld`, `perNotification`, `perItem`, `raw`\./.test(e.sentence))).toBe(true);
  });

  it("a last variant the answer frame does not have, or on an answer that is not a stream", () => {
    const { errors } = mistakes("command.yaml", (t) => t.replace("      last: Error\n", "      last: Failure\n"));
    expect(errors.errors.map((e) => e.sentence)).toContain("exchange `command`: the last variant `Failure` is not a variant of `command/response`.");
    const one = mistakes("vault.yaml", (t) => t.replace("      frame: vault/get/answer\n      messages: one\n", "      frame: vault/get/answer\n      messages: one\n      last: Error\n"));
    expect(one.errors.errors.map((e) => e.sentence)).toContain("exchange `vault-get`: only a stream of messages (`perNotification`, `perItem`) has a last variant.");
  });

  it("a begin-scope tag with no channel description, and a channel that carries an exchange with another answer", () => {
    const { errors } = mistakes("tools-begin-channels.yaml", (t) => t.replace(/^ {2}- \{ table: tools-begin\/channels, opener: provider, tag: 8,.*\n/m, ""));
    expect(errors.errors.map((e) => e.sentence)).toContain("tag 8 (`Secrets`) of `tools-begin/client/channel-request`, opened by the provider, has no channel description (`channels:`).");
    const other = mistakes("tools-begin-channels.yaml", (t) => t.replace("exchange: vault-get, answer: { frame: vault/get/answer", "exchange: vault-get, answer: { frame: vault/ack"));
    expect(other.errors.errors.map((e) => e.sentence)).toContain("channel 2 the proxy opens on `tools-begin/channels` carries exchange `vault-get`, so it is answered with the exchange's frame `vault/get/answer`.");
  });

  it("a standing exchange that is not a stream, or that waits for an exchange of another ask or none", () => {
    const messages = (edit: (text: string) => string) => mistakes("exchanges.yaml", edit).errors.errors.map((e) => e.message);
    expect(
      messages((t) => t.replace("      messages: one\n    unanswered: askedAgain\n    notServed: neverAskedAgain\n  - id: mcp-list-resources", "      messages: one\n    unanswered: askedAgain\n    notServed: neverAskedAgain\n    standing: { after: [mcp-call-tool], ended: nextConnection }\n  - id: mcp-list-resources")),
    ).toContainEqual(expect.stringMatching(/exchanges\.yaml:\d+:\d+: exchange `mcp-list-tools` is standing, so it must be answered with a stream of messages\.$/));
    expect(messages((t) => t.replace("after: [mcp-list-tools, mcp-list-resources,", "after: [mcp-list-toolz, mcp-list-resources,"))).toContainEqual(
      expect.stringMatching(/exchanges\.yaml:\d+:\d+: exchange `mcp-notifications` is asked after `mcp-list-toolz`, which is not another exchange of `proxy\/requests\/ask`\.$/),
    );
  });

  it("a raw answer that names a frame", () => {
    const { errors } = mistakes("postgres-path.yaml", (t) => t.replace("answer: { messages: raw }", "answer: { frame: vault/ack, messages: raw }"));
    expect(errors.errors.map((e) => e.sentence)).toContain("exchange `postgres-connection` is answered with raw bytes, so it names no answer frame.");
  });

  it("a variant whose TypeScript type is already another name", () => {
    const { errors } = mistakes("command.yaml", (t) => t.replace("name: CommandResponseDecodeError", "name: CommandResponseError"));
    expect(errors.errors.map((e) => e.sentence)).toContain("variant `Error` of `command/response` is the TypeScript type `CommandResponseError`, which is already the name of `command/response/error`.");
  });

  it("YAML that does not parse", () => {
    const root = copyOfRepo();
    const path = join(root, "spec/2.3.0/connections.yaml");
    writeFileSync(path, readFileSync(path, "utf8").replace("  - id: daemon/request", "  - id: [daemon/request"));
    expect(() => compileRevision(root, "2.3.0")).toThrow(/^spec\/2\.3\.0\/connections\.yaml:\d+:\d+: /);
  });

  it("the command line prints the mistakes and exits 1, with no stack trace", () => {
    const { root } = mistakes("tools-begin.yaml", (t) => t.replace("        - tag: 8\n          name: Secrets", "        - tag: 7\n          name: Secrets"));
    const run = spawnSync(process.execPath, [cli, "generate", "--root", root], { encoding: "utf8" });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^spec\/2\.3\.0\/tools-begin\.yaml:\d+:\d+: tag 7 of/m);
    expect(run.stderr).not.toMatch(/\bat .*\.js:\d+/);
  });
});
