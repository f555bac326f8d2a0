// The agent-container part of `pnpm demo` runs to its end on both transports and shows each step:
// the begin, the tool call through the proxy's /mcp, the message queued mid-loop and taken at a seam,
// the dequeue, and the A2A client's answers through `diverge connect --serve-agent`. What it checks is
// what was printed (fates, folded messages, task states), never how long anything took.
import { describe, expect, it } from "vitest";
import { runAgentsDemo } from "../src/agents.js";

describe("pnpm demo: agent containers", () => {
  it("begins, streams a loop with a tool call, takes a queued message at a seam, dequeues, and answers an A2A client", async () => {
    let out = "";
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
      return true;
    }) as typeof process.stdout.write;
    try {
      await runAgentsDemo();
    } finally {
      process.stdout.write = write;
    }
    const sections = out.split("\n\n").map((section) => section.trim()).filter((section) => section !== "");
    const section = (title: string) => {
      const found = sections.find((s) => s.startsWith(title));
      expect(found, title).toBeDefined();
      return found!.split("\n").map((line) => line.trim().replace(/\s+/g, " "));
    };
    for (const transport of ["multiplexed", "paths"]) {
      const lines = section(`An agent container on the ${transport} transport`);
      for (const expected of [
        "fate m1 delivered",
        "fate m2 delivered (taken at the seam after the tool's result)",
        "dequeue m3 true",
        "fate m3 dequeued",
        '← user m1 hello pause:a tool:add {"a":19,"b":23}',
        '← tool call call_1_1 add {"a":19,"b":23}',
        "← tool result call_1_1 42",
        "← text add answered: 42",
        "← user m2 pause:b thanks",
        "← text You said: thanks",
        'tool calls served ["add 19 23"]',
        "program's /run calls 1",
      ]) expect(lines, `${transport}: ${expected}`).toContain(expected);
      // m2 landed mid-loop: after m1's tool result, in the same loop; m3 never landed.
      expect(lines.indexOf("← user m2 pause:b thanks")).toBeGreaterThan(lines.indexOf("← tool result call_1_1 42"));
      expect(lines.some((line) => line.startsWith("← user m3"))).toBe(false);
      expect(lines.find((line) => line.startsWith("streamed chunks"))).toMatch(/\d+ assistant_tool_call, 1 tool_response/);

      const a2a = section(`diverge connect --serve-agent over the ${transport} transport`);
      for (const expected of [
        'status working add({"a":2,"b":3}) → 5',
        "task states submitted → working → input-required",
        "→ task input-required: You said: how are you",
        'tool calls served ["add 2 3"]',
        "connect exited status 0 (SIGTERM)",
      ]) expect(a2a, `A2A on ${transport}: ${expected}`).toContain(expected);
      expect(a2a.find((line) => line.startsWith("response artifact"))).toContain("You said: hi");
    }
    expect(section("An agent container on the multiplexed transport")).toContain("secrets fed (tag 5): the gate lets enqueues through");
  }, 120_000);
});
