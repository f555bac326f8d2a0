// The paths transport's whole-file read from offset-based handlers (kind 12's answer): one read as
// large as the file's size says, further pieces only when the file grew meanwhile, and a file past
// the message limit refused rather than cut.
import { describe, expect, it } from "vitest";
import { FUSE_CHUNK_SIZE, type FuseHandlers } from "@diverge/multiplexer/fuse";
import { wholeFile } from "../src/families/fuse/paths.js";

/** Handlers over `content()` (read afresh each call), whose stat reports `statSize`; every read's offset and length noted. */
function over(content: () => Uint8Array, statSize: () => number | undefined) {
  const reads: [number, number][] = [];
  const handlers = {
    async stat() {
      const size = statSize();
      if (size === undefined) return { kind: "missing" as const };
      const t = { secs: 0n, nanos: 0 };
      return { kind: "stat" as const, stat: { kind: "file" as const, size: BigInt(size), mode: 0o644, uid: 0, gid: 0, atime: t, mtime: t, ctime: t } };
    },
    async read(_path: string, offset: bigint, length: number) {
      reads.push([Number(offset), length]);
      const bytes = content();
      if (statSize() === undefined) return { kind: "missing" as const };
      return { kind: "data" as const, bytes: bytes.slice(Number(offset), Number(offset) + length) };
    },
  } as unknown as FuseHandlers;
  return { handlers, reads };
}

const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 13) & 0xff);

describe("wholeFile", () => {
  it("reads a file larger than one piece in one read, sized by its stat", async () => {
    const file = bytes(5 * 1024 * 1024 + 3);
    const { handlers, reads } = over(() => file, () => file.length);
    const answer = await wholeFile(handlers, "f", 16 * 1024 * 1024);
    expect(answer.variant).toBe("Data");
    expect(Buffer.compare(Buffer.from((answer as { data: Uint8Array }).data), Buffer.from(file))).toBe(0);
    expect(reads).toEqual([[0, file.length + 1]]);
  });

  it("reads on in pieces when the file is longer than its stat said, and keeps every byte", async () => {
    const file = bytes(3 * FUSE_CHUNK_SIZE + 10);
    const { handlers, reads } = over(() => file, () => 100);
    const answer = await wholeFile(handlers, "f", 16 * 1024 * 1024);
    expect(Buffer.compare(Buffer.from((answer as { data: Uint8Array }).data), Buffer.from(file))).toBe(0);
    expect(reads[0]).toEqual([0, FUSE_CHUNK_SIZE]);
    expect(reads.length).toBe(4);
  });

  it("refuses a file past the limit, whether its stat says so or it grew past it", async () => {
    const big = bytes(3 * 1024 * 1024);
    const said = await wholeFile(over(() => big, () => big.length).handlers, "f", 1024 * 1024);
    expect(said).toEqual({ variant: "Failed", message: "the file is larger than one message carries (1048576 bytes)" });
    const grew = await wholeFile(over(() => big, () => 10).handlers, "f", 1024 * 1024);
    expect(grew).toEqual({ variant: "Failed", message: "the file is larger than one message carries (1048576 bytes)" });
  });

  it("answers Missing for nothing at the path, and an empty file as no bytes", async () => {
    expect(await wholeFile(over(() => new Uint8Array(0), () => undefined).handlers, "f", 1024)).toEqual({ variant: "Missing" });
    const empty = await wholeFile(over(() => new Uint8Array(0), () => 0).handlers, "f", 1024);
    expect(empty.variant).toBe("Data");
    expect((empty as { data: Uint8Array }).data.length).toBe(0);
  });
});
