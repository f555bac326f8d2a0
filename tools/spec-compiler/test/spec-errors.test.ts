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
