// Small binary messages of a client WebSocket framed here, one after another into one buffer per
// turn, and written onto its socket in one write: no allocation per message, against `ws`'s send (an
// options object or two, a view of the data, a frame buffer, a writable-queue entry each). A command
// sends one message per item (paths.md §5: a message is one item), so for 30-byte lines this was most
// of the provider's work per item. The frames are what `ws` would send (RFC 6455: final, binary,
// masked with a fresh random key each); it is used only where it cannot change the wire: a `ws`
// client with no extension negotiated (nothing compresses, so `ws` holds nothing back), for messages
// under SMALL_FRAME_MAX_BYTES (paths/socket.ts keeps the order against what `ws` writes itself).
import { randomFillSync } from "node:crypto";

/** Messages below this many bytes are written here; larger ones go through `ws` (its native masking). */
export const SMALL_FRAME_MAX_BYTES = 4096;

/** Mask keys are taken from a pool of random bytes (RFC 6455 §5.3: a fresh, unpredictable key per frame), refilled when spent. */
const MASK_POOL_BYTES = 8192;
const maskPool = Buffer.alloc(MASK_POOL_BYTES);
let maskAt = MASK_POOL_BYTES;

/** The bytes of the frame that carries `length` bytes (under 65536). */
function frameBytes(length: number): number {
  return (length < 126 ? 2 : 4) + 4 + length;
}

/** Writes the masked, final binary frame (opcode 2) carrying `payload` (fewer than 65536 bytes) into `frame` at `offset`. */
function writeMaskedFrame(frame: Buffer, offset: number, payload: Uint8Array): void {
  const length = payload.length;
  let at = offset;
  frame[at++] = 0x82;
  if (length < 126) frame[at++] = 0x80 | length;
  else {
    frame[at++] = 0x80 | 126;
    frame[at++] = length >>> 8;
    frame[at++] = length & 0xff;
  }
  if (maskAt + 4 > MASK_POOL_BYTES) {
    randomFillSync(maskPool);
    maskAt = 0;
  }
  const m0 = (frame[at++] = maskPool[maskAt]!);
  const m1 = (frame[at++] = maskPool[maskAt + 1]!);
  const m2 = (frame[at++] = maskPool[maskAt + 2]!);
  const m3 = (frame[at++] = maskPool[maskAt + 3]!);
  maskAt += 4;
  let i = 0;
  for (; i + 4 <= length; i += 4) {
    frame[at + i] = payload[i]! ^ m0;
    frame[at + i + 1] = payload[i + 1]! ^ m1;
    frame[at + i + 2] = payload[i + 2]! ^ m2;
    frame[at + i + 3] = payload[i + 3]! ^ m3;
  }
  if (i < length) frame[at + i] = payload[i]! ^ m0;
  if (i + 1 < length) frame[at + i + 1] = payload[i + 1]! ^ m1;
  if (i + 2 < length) frame[at + i + 2] = payload[i + 2]! ^ m2;
}

/** The most bytes of frames one batch holds before it must be written. */
export const FRAME_BATCH_MAX_BYTES = 64 * 1024;

/**
 * The frames of small messages sent in one turn, written one after another into one buffer (no
 * allocation per message) and handed to the socket in one write. The buffer grows as a turn needs
 * it, from 1 KiB (a socket that sends one small answer holds little) to {@link FRAME_BATCH_MAX_BYTES}.
 */
export class FrameBatch {
  private buffer: Buffer | undefined;
  private used = 0;

  /** Bytes of frames waiting to be taken. */
  get pending(): number {
    return this.used;
  }

  /** Adds the frame carrying `payload` (under {@link SMALL_FRAME_MAX_BYTES}); false, adding nothing, when the batch is full. */
  add(payload: Uint8Array): boolean {
    const size = frameBytes(payload.length);
    if (this.used + size > (this.buffer?.length ?? 0)) {
      if (this.used + size > FRAME_BATCH_MAX_BYTES) return false;
      const grown = Buffer.allocUnsafe(Math.min(FRAME_BATCH_MAX_BYTES, Math.max(1024, 2 * (this.buffer?.length ?? 0), this.used + size)));
      this.buffer?.copy(grown, 0, 0, this.used);
      this.buffer = grown;
    }
    writeMaskedFrame(this.buffer!, this.used, payload);
    this.used += size;
    return true;
  }

  /** The frames added so far, as one buffer of their own; the batch is empty after. */
  take(): Buffer {
    const frames = Buffer.allocUnsafe(this.used);
    this.buffer!.copy(frames, 0, 0, this.used);
    this.used = 0;
    return frames;
  }
}
