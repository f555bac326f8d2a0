// No backend failure of an announced pair escapes the client: strict-pairs.mjs drives every one of
// them in a child process run with `--unhandled-rejections=strict`, where any unhandled rejection or
// uncaught exception ends the process with a non-zero code.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

describe("announced pairs under --unhandled-rejections=strict", () => {
  it("reports every failure as a pairFailed event with its connection id, and the process lives", { timeout: 120_000 }, async () => {
    const script = fileURLToPath(new URL("./strict-pairs.mjs", import.meta.url));
    const { stdout } = await run(process.execPath, ["--unhandled-rejections=strict", script], { cwd: fileURLToPath(new URL("..", import.meta.url)) });
    const events = JSON.parse(stdout) as { provider: string; type: string; kind?: string; id?: number; error?: string }[];
    const failed = (provider: string) => events.filter((event) => event.provider === provider && event.type === "pairFailed");
    expect(failed("database-down")).toEqual([{ provider: "database-down", type: "pairFailed", kind: "postgres", id: 1, error: expect.stringContaining("ECONNREFUSED") }]);
    expect(failed("one-liner")).toEqual([{ provider: "one-liner", type: "pairFailed", kind: "postgres", id: 1, error: expect.stringContaining("ECONNREFUSED") }]);
    expect(failed("database-resets")).toHaveLength(1);
    expect(failed("throwing-handlers").map((event) => [event.kind, event.id, event.error])).toEqual([
      ["postgres", 1, "postgres handler rejected"],
      ["daemon", 1, "daemon handler threw"],
      ["daemon", 2, "daemon data handler threw"],
    ]);
    expect(events.filter((event) => event.provider === "dropped" && event.type === "ended")).toHaveLength(1);
  });
});
