// The constructs the agent family added to the spec: named JSON types (`jsonTypes:`, `schema: { json }`),
// a frame's `published` differences, a channel table's `providerAsks`, and an exchange carried on two
// begin scopes. Each mistake is reported with file:line:column and a plain sentence, and what is right
// reaches the generated code and docs.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileRevision, generateAll } from "../src/generate.js";
import { SpecErrors } from "../src/load.js";
import { repoRoot } from "./helpers.js";

/** A temp folder with a copy of spec/ alone: these tests only compile. */
function copyOfSpec(): string {
  const dir = mkdtempSync(join(tmpdir(), "diverge-agents-spec-"));
  cpSync(join(repoRoot, "spec"), join(dir, "spec"), { recursive: true });
  return dir;
}

function messages(file: string, edit: (text: string) => string): string[] {
  const root = copyOfSpec();
  const path = join(root, "spec", "2.3.0", file);
  const before = readFileSync(path, "utf8");
  const after = edit(before);
  expect(after).not.toBe(before);
  writeFileSync(path, after);
  try {
    compileRevision(root, "2.3.0");
  } catch (error) {
    expect(error).toBeInstanceOf(SpecErrors);
    return (error as SpecErrors).errors.map((e) => e.message);
  }
  throw new Error("the compiler accepted a spec with a mistake");
}

describe("JSON types", () => {
  it("a reference to an undeclared JSON type, from a member and from a field", () => {
    expect(messages("agents-chunk.yaml", (t) => t.replace("type: { array: TopLogprob }", "type: { array: TopLogprobs }"))).toContainEqual(
      expect.stringMatching(/^spec\/2\.3\.0\/agents-chunk\.yaml:\d+:\d+: JSON type `TopLogprobs` is not declared under `jsonTypes` of the revision\.$/),
    );
    expect(messages("agents-begin-scope.yaml", (t) => t.replace("schema: { json: AgenticLoopChunk }", "schema: { json: AgenticLoopChunks }"))).toContainEqual(
      expect.stringMatching(/^spec\/2\.3\.0\/agents-begin-scope\.yaml:\d+:\d+: JSON type `AgenticLoopChunks` is not declared under `jsonTypes` of the revision\.$/),
    );
  });

  it("two variants with one discriminant value, a member given twice, the discriminant redeclared", () => {
    expect(messages("agents-chunk.yaml", (t) => t.replace("- value: assistant_text_content", "- value: assistant_reasoning"))).toContainEqual(
      expect.stringMatching(/agents-chunk\.yaml:\d+:\d+: JSON type `AgenticLoopChunk` has two variants whose `type` is `assistant_reasoning`\.$/),
    );
    expect(messages("agents-chunk.yaml", (t) => t.replace("- { name: key, type: string, doc: The key the message was enqueued under. }", "- { name: text, type: string, doc: The key the message was enqueued under. }"))).toContainEqual(
      expect.stringMatching(/agents-chunk\.yaml:\d+:\d+: variant `UserTextChunk` of JSON type `AgenticLoopChunk` has member `text` twice\.$/),
    );
    expect(messages("agents-chunk.yaml", (t) => t.replace("- { name: completion_tokens, type: u64, doc: Tokens produced. }", "- { name: type, type: u64, doc: Tokens produced. }"))).toContainEqual(
      expect.stringMatching(/variant `UsageChunk` of JSON type `AgenticLoopChunk` declares `type`, which is the union's discriminant\.$/),
    );
  });

  it("`with` naming no object type, a type that contains itself, a name already taken", () => {
    expect(messages("agents-chunk.yaml", (t) => t.replace("with: [EmbeddedResource] }", "with: [ContentBlock] }"))).toContainEqual(
      expect.stringMatching(/variant `ResourceBlock` of JSON type `ContentBlock` takes the members of `ContentBlock`, which is not a JSON object type of the revision\.$/),
    );
    expect(messages("agents-chunk.yaml", (t) => t.replace("- { name: resource, type: ResourceContents, doc: The resource itself. }", "- { name: resource, type: ContentBlock, doc: The resource itself. }"))).toContainEqual(
      expect.stringMatching(/agents-chunk\.yaml:\d+:\d+: JSON type `ContentBlock` contains itself\.$/),
    );
    expect(messages("agents-chunk.yaml", (t) => t.replace("  - name: AgentKey\n", "  - name: EnqueueAnswer\n").replace("json: AgentKey }", "json: EnqueueAnswer }"))).toContainEqual(
      expect.stringMatching(/JSON type name `EnqueueAnswer` is already the name of frame `enqueue\/answer`\.$/),
    );
  });

  it("a json field's schema names one form, and only an MCP schema is nullable", () => {
    expect(messages("agents-begin-scope.yaml", (t) => t.replace("schema: { json: AgentBegin }", "schema: { json: AgentBegin, nullable: true }"))).toContainEqual(
      expect.stringMatching(/only an MCP schema takes `nullable`; a JSON type says null where it allows it\.$/),
    );
  });
});

describe("published tables, provider asks, exchanges on two scopes", () => {
  it("a published difference on a tag with the same meaning, or listed twice", () => {
    expect(messages("agents-begin.yaml", (t) => t.replace('published: none (an unknown tag)', "published: Secrets"))).toContainEqual(
      expect.stringMatching(/agents-begin\.yaml:\d+:\d+: tag 5 is `Secrets` in both tables; list only the tags whose meaning differs\.$/),
    );
    expect(messages("agents-begin.yaml", (t) => t.replace("        - tag: 5\n          published:", "        - tag: 1\n          published:"))).toContainEqual(
      expect.stringMatching(/tag 1 is listed twice under `published`\.$/),
    );
  });

  it("two channel tables that would generate one provider interface", () => {
    expect(messages("agents-begin.yaml", (t) => t.replace("  - id: agents-begin/channels\n    title: Channels of the agents::begin scope\n", "  - id: agents-begin/channels\n    title: Channels of the agents::begin scope\n    providerAsks: ProviderAsks\n"))).toContainEqual(
      expect.stringMatching(/^spec\/2\.3\.0\/[a-z-]+\.yaml:\d+:\d+: channel tables `agents-begin\/channels` and `tools-begin\/channels` would both generate `ProviderAsks`; give one of them its own `providerAsks`\.$/),
    );
  });

  it("an exchange carried on two scopes under different tags", () => {
    const found = messages("agents-begin-channels.yaml", (t) =>
      t
        .replace("tag: 2, bareFinish: notServed, exchange: vault-get", "tag: 2, bareFinish: notServed, exchange: vault-set")
        .replace("tag: 3, bareFinish: notServed, exchange: vault-set", "tag: 3, bareFinish: notServed, exchange: vault-get"),
    );
    expect(found).toContainEqual(
      expect.stringMatching(/tools-begin-channels\.yaml:\d+:\d+: exchange `vault-get` is carried as tag 3 \(`VaultSet`, opened by the proxy\) on `agents-begin\/channels`, so on `tools-begin\/channels` it must be carried the same way\.$/),
    );
  });

  it("generates the agents scope's surfaces beside the tools scope's, and marks the published table in the docs", () => {
    const files = new Map(generateAll(repoRoot, "0.0.0-test").map((f) => [f.path, f.text]));
    const client = files.get("packages/client/src/gen/exchanges.ts")!;
    expect(client).toContain("export function bindProviderAsks(engine: ChannelAskEngine<ToolsBeginChannelRequest>): ProviderAsks {");
    expect(client).toContain("export function bindAgentsBeginChannelsProviderAsks(engine: ChannelAskEngine<AgentsBeginChannelRequest>): AgentsBeginChannelsProviderAsks {");
    expect(client).toContain("export function dispatchAgentsBeginChannelsProxyChannel(");
    const server = files.get("packages/server/src/gen/exchanges.ts")!;
    expect(server).toContain("export function routeAgentsBeginChannelsProviderChannel<C>(");
    expect(server).toContain("export function routeToolsBeginChannelsProviderChannel<C>(");
    const json = files.get("packages/codec/src/gen/2.3.0/json-types.ts")!;
    expect(json).toContain("export function checkAgenticLoopChunk(value: unknown): string | undefined {");
    const page = [...files.entries()].find(([path]) => path.startsWith("docs/2.3.0/") && path.endsWith("agents-begin/client/channel-request/index.md"));
    expect(page?.[1]).toContain("**Differs from the published A4d table.**");
  });
});
