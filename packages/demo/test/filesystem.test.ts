// The filesystem part of `pnpm demo` runs to its end and shows, on both transports, a Snapshot and a
// live delta, a read and a write, and a program in the container working through a FUSE mount
// served from the provider's directory (or one line saying why FUSE is skipped).
import { describe, expect, it } from "vitest";
import { fuseUnavailable } from "@diverge/server";
import { runFilesystemDemo } from "../src/filesystem.js";

async function captured(run: () => Promise<void>): Promise<string[]> {
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
    return true;
  }) as typeof process.stdout.write;
  try {
    await run();
  } finally {
    process.stdout.write = write;
  }
  return out.split("\n").map((line) => line.trim().replace(/\s+/g, " "));
}

describe("pnpm demo: the container's filesystem", () => {
  it("shows a tree, a delta, a read, a write and a FUSE mount on both transports", async () => {
    const lines = await captured(runFilesystemDemo);
    const unavailable = fuseUnavailable();
    for (const transport of ["multiplexed", "paths"]) {
      const from = lines.findIndex((line) => line.startsWith(`tree (${transport})`));
      expect(from, transport).toBeGreaterThan(0);
      const part = lines.slice(from);
      expect(part[0]).toMatch(new RegExp(`^tree \\(${transport}\\) Snapshot \\(\\d+ entries at the root\\): .*README, etc, etc/app\\.conf`));
      // On paths: README, etc, etc/app.conf and both notes; the multiplexed part's FUSE mount point is
      // not in the tree (served mounts are never entered, a mount whose provider left is cleared).
      expect(part).toContain(`→ delta Inserted notes-${transport}.txt (file, 25 bytes); the live tree now has ${transport === "multiplexed" ? 4 : 5} paths`);
      expect(part).toContain(`read (${transport}) etc/app.conf`);
      expect(part).toContain(`→ bytes mode = ${transport === "multiplexed" ? "demo" : "multiplexed"}`);
      expect(part).toContain(`→ on disk mode = ${transport}`);
      if (unavailable) {
        expect(part).toContain(`mount (${transport}) FUSE part skipped: ${unavailable}`);
      } else {
        expect(part.some((line) => line.startsWith(`mount (${transport}) FUSE: the provider's `) && line.endsWith(`at /workspace-${transport} in the container`))).toBe(true);
        expect(part).toContain("program in container read 3 rows of input.csv, wrote total.txt; the mount now holds input.csv, total.txt");
        expect(part).toContain("→ on the provider total.txt: total 12");
      }
    }
  }, 120_000);
});
