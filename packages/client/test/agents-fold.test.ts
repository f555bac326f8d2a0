// The chunk fold (families/agents/fold.ts) on the fourteen chunk types: deltas joined while the same
// kind goes on in the same thread, tool calls by id, user parts into their message, usage summed.
import { describe, expect, it } from "vitest";
import { checkAgenticLoopChunk, type AgenticLoopChunk } from "@diverge/codec";
import { ChunkFold, foldAll, foldChunks, blockOfUserPart } from "../src/families/agents/index.js";

const chunks: AgenticLoopChunk[] = [
  { type: "user_text_content", key: "k1", text: "hello" },
  { type: "user_image_content", key: "k1", data: "iVBO", mimeType: "image/png" },
  { type: "user_resource", key: "k1", resource: { uri: "file:///a", text: "A" } },
  { type: "user_resource_link", key: "k1", uri: "file:///b", name: "b" },
  { type: "user_audio_content", key: "k1", data: "UklG", mimeType: "audio/wav" },
  { type: "assistant_reasoning", text: "I " },
  { type: "assistant_reasoning", text: "think.", logprobs: [{ token: "think", logprob: -0.5, top_logprobs: [] }] },
  { type: "assistant_tool_call", id: "c1", name: "echo", arguments: '{"te' },
  { type: "assistant_tool_call", id: "c1", name: "echo", arguments: 'xt":"hi"}' },
  { type: "tool_response", id: "c1", content: [{ type: "text", text: "hi" }] },
  { type: "assistant_text_content", text: "You " },
  { type: "assistant_text_content", text: "said hi." },
  { type: "assistant_text_content", text: "Sub", parent_tool_call_id: "c9" },
  { type: "assistant_refusal", text: "No." },
  { type: "assistant_image_content", data: "iVBO", mimeType: "image/png" },
  { type: "assistant_audio_content", data: "UklG", mimeType: "audio/wav" },
  { type: "usage", prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
  { type: "usage", prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  { type: "notification", is_fatal: false, message: { paused: "a" } },
  { type: "user_text_content", key: "k2", text: "again" },
  { type: "notification", is_fatal: true, message: "over" },
];

describe("the chunk fold", () => {
  it("every test chunk is one of the fourteen", () => {
    for (const chunk of chunks) expect(checkAgenticLoopChunk(chunk)).toBeUndefined();
    expect(new Set(chunks.map((chunk) => chunk.type)).size).toBe(14);
  });

  it("folds deltas into whole messages, tool calls by id, usage summed", () => {
    const { messages, usage } = foldAll(chunks);
    expect(usage).toEqual({ prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 });
    expect(messages.map((message) => message.kind)).toEqual(["user", "reasoning", "tool_call", "tool_response", "text", "text", "refusal", "image", "audio", "notification", "user", "notification"]);
    expect(messages[0]).toEqual({
      kind: "user",
      key: "k1",
      content: [
        { type: "text", text: "hello" },
        { type: "image", data: "iVBO", mimeType: "image/png" },
        { type: "resource", resource: { uri: "file:///a", text: "A" } },
        { type: "resource_link", uri: "file:///b", name: "b" },
        { type: "audio", data: "UklG", mimeType: "audio/wav" },
      ],
    });
    expect(messages[1]).toMatchObject({ kind: "reasoning", text: "I think.", logprobs: [{ token: "think" }] });
    expect(messages[2]).toEqual({ kind: "tool_call", id: "c1", name: "echo", arguments: '{"text":"hi"}', parsed: { text: "hi" }, complete: true });
    expect(messages[3]).toEqual({ kind: "tool_response", id: "c1", content: [{ type: "text", text: "hi" }], isError: false });
    expect(messages[4]).toMatchObject({ kind: "text", text: "You said hi." });
    expect(messages[5]).toMatchObject({ kind: "text", text: "Sub", parent_tool_call_id: "c9" });
    expect(messages[11]).toEqual({ kind: "notification", is_fatal: true, message: "over" });
  });

  it("joins a tool call's fragments under its id when other chunks come between", () => {
    const fold = new ChunkFold();
    fold.add({ type: "assistant_tool_call", id: "a", name: "one", arguments: "{" });
    fold.add({ type: "assistant_tool_call", id: "b", name: "two", arguments: "{}" });
    fold.add({ type: "assistant_text_content", text: "meanwhile" });
    const steps = fold.add({ type: "assistant_tool_call", id: "a", name: "one", arguments: "}" });
    expect(steps).toMatchObject([{ type: "grew", delta: "}", message: { id: "a", arguments: "{}" } }]);
    const done = fold.finish().filter((step) => step.type === "completed").map((step) => (step.message as { id?: string }).id ?? step.message.kind);
    expect(done).toEqual(["text", "a", "b"]);
  });

  it("says what each chunk did: began, grew, completed, usage", async () => {
    async function* stream() {
      yield* chunks.slice(5, 12);
    }
    const steps = [];
    for await (const step of foldChunks(stream())) steps.push(`${step.type}${step.type === "usage" ? "" : `:${step.message.kind}`}`);
    expect(steps).toEqual([
      "began:reasoning",
      "grew:reasoning",
      "completed:reasoning",
      "began:tool_call",
      "grew:tool_call",
      "completed:tool_call",
      "began:tool_response",
      "completed:tool_response",
      "began:text",
      "grew:text",
      "completed:text",
    ]);
  });

  it("a user part's block is the part without its key", () => {
    expect(blockOfUserPart({ type: "user_text_content", key: "k", text: "t", _meta: { a: 1 } })).toEqual({ type: "text", text: "t", _meta: { a: 1 } });
    expect(blockOfUserPart({ type: "usage", prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 })).toBeUndefined();
  });
});
