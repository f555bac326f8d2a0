// The provider's answer in parts (`serveAskParts`): a read's head then its data are, joined, exactly
// the codec's encoding of the answer, and the data is the handler's own bytes, not a copy. Every other
// answer comes whole, as `serveAsk` gives it.
import { decodeFuseReadAnswer, encodeFuseAsk, encodeFuseReadAnswer } from "@diverge/codec";
import { describe, expect, it } from "vitest";
import { joinedAnswer, serveAsk, serveAskParts, type FuseHandlers } from "../src/fuse/index.js";

const data = Uint8Array.from({ length: 70_001 }, (_, i) => (i * 11) & 0xff);
const t = { secs: 1n, nanos: 2 };
const handlers = {
  read: async (path: string) => (path === "gone" ? { kind: "missing" as const } : path === "bad" ? { kind: "error" as const, message: "EACCES: no" } : { kind: "data" as const, bytes: data }),
  stat: async () => ({ kind: "stat" as const, stat: { kind: "file" as const, size: 3n, mode: 0o644, uid: 1, gid: 2, atime: t, mtime: t, ctime: t } }),
} as unknown as FuseHandlers;

describe("serveAskParts", () => {
  it("gives a read's data behind its head: joined, the codec's encoding of the answer", async () => {
    const parts = await serveAskParts(handlers, encodeFuseAsk({ variant: "Read", path: "f", offset: 0n, length: 1 << 20 }));
    expect(parts.body).toBe(data);
    expect(Buffer.compare(Buffer.from(joinedAnswer(parts)), Buffer.from(encodeFuseReadAnswer({ variant: "Data", data })))).toBe(0);
    const read = decodeFuseReadAnswer(joinedAnswer(parts));
    expect(read.variant === "Data" && Buffer.compare(Buffer.from(read.data), Buffer.from(data))).toBe(0);
  });

  it("gives a read that is missing or failed, and every other answer, whole", async () => {
    for (const path of ["gone", "bad"]) {
      const parts = await serveAskParts(handlers, encodeFuseAsk({ variant: "Read", path, offset: 0n, length: 10 }));
      expect(parts.body).toBeUndefined();
      expect(decodeFuseReadAnswer(parts.head).variant).toBe(path === "gone" ? "Missing" : "Failed");
    }
    const stat = encodeFuseAsk({ variant: "Stat", path: "f" });
    const parts = await serveAskParts(handlers, stat);
    expect(parts.body).toBeUndefined();
    expect(Buffer.compare(Buffer.from(parts.head), Buffer.from(await serveAsk(handlers, stat)))).toBe(0);
  });
});
