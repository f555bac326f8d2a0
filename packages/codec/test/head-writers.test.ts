// Head writers (a value's fields before its trailing sequence, then the sequence's count) and the
// chunked PostcardWriter they stream into: the bytes equal the whole value's encoding, the refusals
// are the whole writer's, and values past the writer's 64 KiB chunk are written exactly.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decodeFiletreeFrame,
  encodeFiletreeFrame,
  writeFiletreeFrameRemovedHead,
  writeFiletreeFrameSnapshotHead,
  writeFiletreeNode,
  writeFiletreeNodeDirectoryHead,
  type FiletreeFrame,
  type FiletreeFrameRemoved,
  type FiletreeFrameSnapshot,
  type FiletreeNode,
  type FiletreeNodeDirectory,
} from "../src/index.js";
import { EncodeError, PostcardWriter } from "../src/runtime/index.js";
import { postcard } from "./gen/2.3.0/arbitraries.js";

const nodes = postcard["filetree/node"]! as fc.Arbitrary<FiletreeNode>;
const frames = postcard["filetree/frame"]! as fc.Arbitrary<FiletreeFrame>;
const directories = fc.record({
  name: fc.string({ unit: "binary", maxLength: 12 }),
  created_at: fc.option(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), { nil: null }),
  modified_at: fc.option(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), { nil: null }),
  changes: fc.boolean(),
  children: fc.array(nodes, { maxLength: 8 }),
}).map((d): FiletreeNodeDirectory => ({ variant: "Directory", ...d }));

/** The whole writer's bytes for one node. */
function whole(node: FiletreeNode): Uint8Array {
  const w = new PostcardWriter("filetree/frame");
  writeFiletreeNode(w, node);
  return w.finish();
}

/** A directory written as the tree walk writes it: head, then each child. */
function streamed(dir: FiletreeNodeDirectory): Uint8Array {
  const w = new PostcardWriter("filetree/frame");
  writeFiletreeNodeDirectoryHead(w, dir, dir.children.length);
  for (const child of dir.children) writeFiletreeNode(w, child);
  return w.finish();
}

function snapshot(frame: FiletreeFrameSnapshot, prefix = 0): Uint8Array {
  const w = new PostcardWriter("filetree/frame");
  writeFiletreeFrameSnapshotHead(w, {}, frame.children.length);
  for (const child of frame.children) writeFiletreeNode(w, child);
  return w.finish(prefix);
}

/** Byte equality that stays fast for megabytes (a deep `toEqual` does not); reports the first difference. */
function expectBytes(actual: Uint8Array, expected: Uint8Array): void {
  let at = 0;
  while (at < actual.length && at < expected.length && actual[at] === expected[at]) at++;
  if (at === actual.length && at === expected.length) return;
  expect({ length: actual.length, firstDifference: at, byte: actual[at] }).toEqual({ length: expected.length, firstDifference: at, byte: expected[at] });
}

/** What a call threw, as an EncodeError's frame, field and message. */
function refusal(run: () => unknown): { frame: string; field: string | undefined; message: string } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(EncodeError);
    const e = error as EncodeError;
    return { frame: e.frame, field: e.field, message: e.message };
  }
  throw new Error("wrote");
}

describe("head writers", () => {
  it("write a directory's bytes exactly as the whole writer does, for every directory", () => {
    fc.assert(fc.property(directories, (dir) => {
        expectBytes(streamed(dir), whole(dir));
      }), { numRuns: 500 });
  });

  it("write every Directory the generated node arbitrary makes, at any depth", () => {
    fc.assert(
      fc.property(nodes, (node) => {
        const visit = (n: FiletreeNode): void => {
          if (n.variant !== "Directory") return;
          expectBytes(streamed(n), whole(n));
          n.children.forEach(visit);
        };
        visit(node);
      }),
      { numRuns: 500 },
    );
  });

  it("write a Snapshot frame's bytes exactly as encodeFiletreeFrame does, and a Removed frame's", () => {
    fc.assert(
      fc.property(frames, (frame) => {
        if (frame.variant === "Snapshot") {
          expectBytes(snapshot(frame), encodeFiletreeFrame(frame));
        } else if (frame.variant === "Removed") {
          const w = new PostcardWriter("filetree/frame");
          writeFiletreeFrameRemovedHead(w, {}, frame.path.length);
          for (const part of frame.path) w.string("path", part);
          expectBytes(w.finish(), encodeFiletreeFrame(frame));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("refuse a bad head field with the whole writer's frame, field and text", () => {
    const good: Omit<FiletreeNodeDirectory, "variant" | "children"> = { name: "d", created_at: null, modified_at: 1n, changes: true };
    const bad: Record<string, unknown>[] = [
      { name: 5 },
      { name: undefined },
      { created_at: 1 },
      { created_at: -1n },
      { modified_at: 1n << 64n },
      { modified_at: "1" },
      { changes: 1 },
      { changes: null },
    ];
    for (const change of bad) {
      const head = { ...good, ...change } as never;
      const expected = refusal(() => writeFiletreeNode(new PostcardWriter("filetree/frame"), { variant: "Directory", ...(head as object), children: [] } as FiletreeNode));
      expect(refusal(() => writeFiletreeNodeDirectoryHead(new PostcardWriter("filetree/frame"), head, 0))).toEqual(expected);
    }
    expect(refusal(() => writeFiletreeNodeDirectoryHead(new PostcardWriter("filetree/frame"), null as never, 0))).toEqual({
      frame: "filetree/frame",
      field: undefined,
      message: "FiletreeNodeDirectory head must be an object",
    });
  });

  it("refuse a count that is not a whole number from 0 to 2^53 - 1", () => {
    const head = { name: "d", created_at: null, modified_at: null, changes: true };
    for (const count of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, "3", 3n, null]) {
      expect(refusal(() => writeFiletreeNodeDirectoryHead(new PostcardWriter("filetree/frame"), head, count as number))).toEqual({
        frame: "filetree/frame",
        field: "children",
        message: "children count must be a whole number from 0 to 9007199254740991",
      });
      expect(refusal(() => writeFiletreeFrameSnapshotHead(new PostcardWriter("filetree/frame"), {}, count as number)).field).toBe("children");
      expect(refusal(() => writeFiletreeFrameRemovedHead(new PostcardWriter("filetree/frame"), {}, count as number)).message).toBe(
        "path count must be a whole number from 0 to 9007199254740991",
      );
    }
    const w = new PostcardWriter("filetree/frame");
    writeFiletreeFrameSnapshotHead(w, {}, 2 ** 53 - 1);
    expect(Array.from(w.finish())).toEqual([0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]);
  });
});

// ---- the chunked writer --------------------------------------------------------------------------

const utf8 = new TextEncoder();

/** The reference: postcard of each write, as plain byte arrays concatenated once at the end. */
class Reference {
  private parts: Uint8Array[] = [];
  length = 0;
  raw(bytes: ArrayLike<number>): void {
    this.parts.push(Uint8Array.from(bytes));
    this.length += bytes.length;
  }
  varint(value: number | bigint): void {
    const out: number[] = [];
    let v = BigInt(value);
    while (v >= 0x80n) {
      out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    out.push(Number(v));
    this.raw(out);
  }
  bytes(value: Uint8Array): void {
    this.varint(value.length);
    this.raw(value);
  }
  finish(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const part of this.parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }
}

type Op = { kind: "u8" | "u32"; value: number } | { kind: "u64"; value: bigint } | { kind: "string"; value: string } | { kind: "bytes"; value: Uint8Array };

/** Writes of every size, so the writer crosses its doubling and chunk boundaries at every offset. */
const ops: fc.Arbitrary<Op[]> = fc.array(
  fc.oneof(
    fc.integer({ min: 0, max: 0xff }).map((value): Op => ({ kind: "u8", value })),
    fc.integer({ min: 0, max: 0xffffffff }).map((value): Op => ({ kind: "u32", value })),
    fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((value): Op => ({ kind: "u64", value })),
    fc.string({ unit: "binary", maxLength: 40 }).map((value): Op => ({ kind: "string", value })),
    fc.integer({ min: 0, max: 200_000 }).map((n): Op => ({ kind: "bytes", value: new Uint8Array(n).map((_, i) => (i * 31 + n) & 0xff) })),
  ),
  { maxLength: 30 },
);

describe("PostcardWriter, chunked", () => {
  it("writes a string's UTF-8 in place exactly as TextEncoder does: ASCII, two-, three- and four-byte characters, lone surrogates as U+FFFD", () => {
    for (const text of ["", "plain", "é", "€uro", "𝄞 clef", "\ud800", "a\udc00b", "\ud83d\ude00\ud83d", "x".repeat(70_000) + "é"]) {
      const w = new PostcardWriter("test");
      w.string("f", text);
      const ref = new Reference();
      ref.bytes(utf8.encode(text));
      expectBytes(w.finish(), ref.finish());
    }
  });

  it("writes exactly what a plain concatenation does, byteLength right after every write, finish(prefix) zeros in front", () => {
    fc.assert(
      fc.property(ops, fc.integer({ min: 0, max: 16 }), (list, prefix) => {
        const w = new PostcardWriter("test");
        const ref = new Reference();
        for (const op of list) {
          switch (op.kind) {
            case "u8":
              w.u8("f", op.value);
              ref.raw([op.value]);
              break;
            case "u32":
              w.u32("f", op.value);
              ref.varint(op.value);
              break;
            case "u64":
              w.u64("f", op.value);
              ref.varint(op.value);
              break;
            case "string":
              w.string("f", op.value);
              ref.bytes(utf8.encode(op.value));
              break;
            case "bytes":
              w.byteString("f", op.value);
              ref.bytes(op.value);
              break;
          }
          expect(w.byteLength).toBe(ref.length);
        }
        const expected = ref.finish();
        expectBytes(w.finish(), expected);
        // parts(): the same bytes in the pieces held, none empty, none copied.
        const parts = w.parts();
        expect(parts.every((part) => part.length > 0)).toBe(true);
        expectBytes(Uint8Array.from(parts.flatMap((part) => Array.from(part))), expected);
        const prefixed = w.finish(prefix);
        expect(prefixed.length).toBe(prefix + expected.length);
        expectBytes(prefixed.subarray(0, prefix), new Uint8Array(prefix));
        expectBytes(prefixed.subarray(prefix), expected);
      }),
      { numRuns: 60 },
    );
  });

  it("writes a several-MiB snapshot of many strings as the reference does, and it round-trips", () => {
    const children: FiletreeNode[] = [];
    for (let i = 0; i < 60_000; i++) {
      const name = `file-${i}-${"é".repeat(i % 37)}`;
      children.push(i % 3 === 0 ? { variant: "File", name, size: BigInt(i) * 4099n, created_at: null, modified_at: 1_700_000_000n + BigInt(i) } : { variant: "Symlink", name, path: ["a", name], created_at: null, modified_at: null });
    }
    children.push({ variant: "Directory", name: "big", created_at: null, modified_at: null, changes: true, children: [{ variant: "File", name: "x".repeat(300_000), size: null, created_at: null, modified_at: null }] });
    const frame: FiletreeFrameSnapshot = { variant: "Snapshot", children };
    const bytes = encodeFiletreeFrame(frame);
    expect(bytes.length).toBeGreaterThan(4 << 20);
    expect(decodeFiletreeFrame(bytes)).toEqual(frame);
    expectBytes(snapshot(frame), bytes);

    // The reference: every node's bytes concatenated after the frame's head.
    const head = new Reference();
    head.raw([0x00]);
    head.varint(children.length);
    const parts = [head.finish(), ...children.map(whole)];
    const reference = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      reference.set(p, at);
      at += p.length;
    }
    expectBytes(bytes, reference);

    const prefixed = snapshot(frame, 9);
    expect(Array.from(prefixed.subarray(0, 9))).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expectBytes(prefixed.subarray(9), bytes);
  });

  it("never doubles past 64 KiB: it holds chunks of 64 KiB (or one write's size), each all but full", () => {
    const w = new PostcardWriter("test");
    const inside = w as unknown as { buffer: Uint8Array; chunks: Uint8Array[] };
    for (let i = 0; i < 200_000; i++) w.string("f", `name-${i}`);
    w.byteString("f", new Uint8Array(300_000));
    for (let i = 0; i < 1000; i++) w.string("f", `more-${i}`);
    const held = [...inside.chunks.map((c) => c.buffer.byteLength), inside.buffer.length];
    expect(inside.buffer.length).toBe(64 * 1024);
    expect(held.filter((n) => n > 64 * 1024).length).toBeLessThanOrEqual(1);
    // Held memory is the bytes written plus one chunk, and at most a varint's room lost per chunk.
    const total = held.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(w.byteLength + 64 * 1024 + 10 * held.length);
    expect(w.finish().length).toBe(w.byteLength);
  });

  it("counts byteLength across chunks, and a Removed frame of many path parts matches encodeFiletreeFrame", () => {
    const path = Array.from({ length: 200_000 }, (_, i) => `p${i}`);
    const frame: FiletreeFrameRemoved = { variant: "Removed", path };
    const w = new PostcardWriter("filetree/frame");
    writeFiletreeFrameRemovedHead(w, {}, path.length);
    expect(w.byteLength).toBe(4); // 03, then 200000 as a three-byte varint
    for (const part of path) w.string("path", part);
    const bytes = encodeFiletreeFrame(frame);
    expect(w.byteLength).toBe(bytes.length);
    expectBytes(w.finish(), bytes);
    expect(decodeFiletreeFrame(bytes)).toEqual(frame);
  });
});
