// The provider side takes the revision to speak on both transports.
import { describe, expect, it } from "vitest";
import { connectProxy, openContainer, RevisionError } from "../src/index.js";

describe("the revision a provider speaks", () => {
  it("connectProxy refuses a revision not spoken, and names the one it speaks", async () => {
    expect(() => connectProxy("ws://127.0.0.1:9", {}, { revision: "3.0.0" })).toThrow(RevisionError);
    const connection = connectProxy("ws://127.0.0.1:9", {}, { revision: "2.3.0", minBackoffMs: 1000 });
    expect(connection.revision).toBe("2.3.0");
    await connection.close();
  });

  it("openContainer refuses a revision not spoken before dialling", async () => {
    await expect(openContainer("ws://127.0.0.1:9", { revision: "3.0.0" })).rejects.toBeInstanceOf(RevisionError);
  });
});
