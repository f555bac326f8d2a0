// The postcard runtime and the generated filetree frame at their edges: nesting depth, varint
// limits, counts larger than the input, and what the encoder refuses.
import { describe, expect, it } from "vitest";
import { decodeFiletreeFrame, encodeFiletreeFrame, PostcardError, type FiletreeNode } from "../src/gen/2.3.0/index.js";
import { decodeTreeResponse, TreeResponseError } from "../src/gen/2.3.0/index.js";
import { EncodeError, PostcardFailure, PostcardReader, PostcardWriter, POSTCARD_MAX_DEPTH, toHex } from "../src/runtime/index.js";

function failure(run: () => unknown): PostcardError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PostcardError);
    return error as PostcardError;
  }
  throw new Error("decoded");
}

/** A snapshot of one directory chain `depth` deep: Snapshot [d [d [d …]]]. */
function nested(depth: number): Uint8Array {
  const dir = [0x01, 0x01, 0x64, 0x00, 0x00, 0x01, 0x01]; // Directory "d", no times, changes, one child
  const out = [0x00, 0x01];
  for (let i = 0; i < depth - 1; i++) out.push(...dir);
  out.push(0x01, 0x01, 0x64, 0x00, 0x00, 0x01, 0x00); // the innermost, no children
  return Uint8Array.from(out);
}

describe("postcard filetree", () => {
  it("reads a tree nested as deep as the limit", () => {
    const frame = decodeFiletreeFrame(nested(POSTCARD_MAX_DEPTH - 1));
    let node = (frame as { children: FiletreeNode[] }).children[0]!;
    let depth = 1;
    while (node.variant === "Directory" && node.children.length > 0) {
      node = node.children[0]!;
      depth++;
    }
    expect(depth).toBe(POSTCARD_MAX_DEPTH - 1);
  });

  it("refuses a tree nested deeper than the limit with its typed error, not a stack overflow", () => {
    const error = failure(() => decodeFiletreeFrame(nested(200_000)));
    expect(error.variant).toBe("TooDeep");
    expect(error.message).toBe(`postcard value nests deeper than ${POSTCARD_MAX_DEPTH} levels`);
  });

  it("wraps the postcard error in the tree response's own", () => {
    const bytes = new Uint8Array([0x00, ...nested(100_000)]);
    try {
      decodeTreeResponse(bytes);
      throw new Error("decoded");
    } catch (error) {
      expect(error).toBeInstanceOf(TreeResponseError);
      expect((error as TreeResponseError).message).toBe(`filetree frame did not decode: postcard value nests deeper than ${POSTCARD_MAX_DEPTH} levels`);
      expect((error as Error).cause).toBeInstanceOf(PostcardError);
    }
  });

  it("ends a count far larger than the input at the end of the input", () => {
    // Snapshot with 2^62 children, then one child's worth of bytes.
    const error = failure(() => decodeFiletreeFrame(Uint8Array.from([0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00, 0x01, 0x61, 0x00, 0x00, 0x00])));
    expect(error.variant).toBe("DeserializeUnexpectedEnd");
  });

  it("writes the shortest varints and round-trips u64 extremes exactly", () => {
    for (const size of [0n, 127n, 128n, 300n, (1n << 53n) + 1n, (1n << 64n) - 1n]) {
      const value = { variant: "Snapshot" as const, children: [{ variant: "File" as const, name: "a", size, created_at: null, modified_at: null }] };
      const bytes = encodeFiletreeFrame(value);
      expect(decodeFiletreeFrame(bytes)).toEqual(value);
    }
    expect(toHex(encodeFiletreeFrame({ variant: "Snapshot", children: [{ variant: "File", name: "a", size: 300n, created_at: null, modified_at: null }] }))).toBe("000100016101ac020000");
  });

  it("refuses to write what is not its type", () => {
    const bad = (node: unknown) => () => encodeFiletreeFrame({ variant: "Snapshot", children: [node as FiletreeNode] });
    expect(bad({ variant: "File", name: "a", size: 1 << 20, created_at: null, modified_at: null })).toThrow(EncodeError);
    expect(bad({ variant: "File", name: "a", size: -1n, created_at: null, modified_at: null })).toThrow(/u64/);
    expect(bad({ variant: "File", name: "a", size: 1n << 64n, created_at: null, modified_at: null })).toThrow(/u64/);
    expect(bad({ variant: "Pipe", name: "a" })).toThrow(/unknown variant Pipe/);
    expect(bad(null)).toThrow(/must be an object/);
    expect(bad({ variant: "Directory", name: "a", created_at: null, modified_at: null, changes: 1, children: [] })).toThrow(/boolean/);
    expect(bad({ variant: "Symlink", name: "a", path: "etc", created_at: null, modified_at: null })).toThrow(/array/);
  });
});

describe("postcard runtime", () => {
  const read = (hex: number[], how: (r: PostcardReader) => unknown) => {
    const r = new PostcardReader(Uint8Array.from(hex), 0, hex.length);
    try {
      return how(r);
    } catch (error) {
      if (error instanceof PostcardFailure) return error.variant;
      throw error;
    }
  };
  it("keeps each varint within its type's bytes", () => {
    expect(read([0xff, 0xff, 0x03], (r) => r.u16())).toBe(0xffff);
    expect(read([0xff, 0xff, 0x04], (r) => r.u16())).toBe("DeserializeBadVarint");
    expect(read([0xff, 0xff, 0xff, 0xff, 0x0f], (r) => r.u32())).toBe(0xffffffff);
    expect(read([0xff, 0xff, 0xff, 0xff, 0x8f], (r) => r.u32())).toBe("DeserializeBadVarint");
    expect(read([0x80, 0x80], (r) => r.u32())).toBe("DeserializeUnexpectedEnd");
    expect(read([0x80, 0x00], (r) => r.u64())).toBe(0n);
    expect(read([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], (r) => r.u64())).toBe((1n << 64n) - 1n);
  });
  it("writes u16 and u32 as varints and u8 as a byte", () => {
    const w = new PostcardWriter("test");
    w.u8("a", 0xff);
    w.u16("b", 0xffff);
    w.u32("c", 300);
    expect(toHex(w.finish())).toBe("ffffff03ac02");
    expect(() => w.u16("b", 0x10000)).toThrow(EncodeError);
  });
});
