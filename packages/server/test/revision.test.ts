// The proxy takes the revision to speak, from the library and from the command line.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { RevisionError, startProxy } from "../src/index.js";

const cli = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "cli.js");

describe("the revision a proxy speaks", () => {
  it("is the newest by default and can be named", async () => {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, revision: "2.3.0" });
    try {
      expect(proxy.options.revision).toBe("2.3.0");
    } finally {
      await proxy.close();
    }
  });

  it("refuses one it does not speak, before listening", async () => {
    await expect(startProxy({ port: 0, programPort: 0, pgPort: 0, revision: "1.0.0" })).rejects.toBeInstanceOf(RevisionError);
  });

  it("diverge-proxy --revision refuses an unknown revision with exit code 2", () => {
    const run = spawnSync(process.execPath, [cli, "--revision", "9.9.9", "--port", "0"], { encoding: "utf8", timeout: 20_000 });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("revision 9.9.9 is not spoken here");
  });
});
