// Binary WebSocket messages written straight onto the connection's byte stream (RFC 6455 §5.2), for
// the frames of the multiplexed connection once the handshake is done. `ws`'s sender allocates a
// header per message, copies a client's payload again to mask it, and writes header and payload as
// two chunks; here each message is one buffer (the WebSocket header, the frame's own header, its
// payload, masked in place on the client's side) and one write. Only unfragmented binary
// messages are written; control frames (ping, pong, close) stay `ws`'s own, on the same stream, and
// each message leaves whole, so the two never interleave within a message.

/** The byte stream under the WebSocket: what is written leaves in order, after what was written before. */
export interface ByteSink {
  write(chunk: Uint8Array): boolean;
}

/** FIN set, opcode 2 (binary). */
const FIN_BINARY = 0x82;
const MASK_BIT = 0x80;
/** Masks drawn from the random source at once (four bytes each). */
const MASK_POOL_BYTES = 8192;

/**
 * XORs `length` bytes of `buffer` from `start` with `key` (payload byte i with key[i mod 4], RFC
 * 6455 §5.3), in place: byte by byte up to a 4-byte boundary of the underlying memory, then a
 * 32-bit word at a time, so a large frame is masked at memory speed with no second buffer.
 */
export function maskInPlace(buffer: Uint8Array, start: number, length: number, key: Uint8Array): void {
  let i = 0;
  const head = Math.min(length, (4 - ((buffer.byteOffset + start) & 3)) & 3);
  for (; i < head; i++) buffer[start + i]! ^= key[i & 3]!;
  const words = (length - i) >>> 2;
  if (words > 0) {
    // The key's bytes from i on, as this platform's Uint32Array reads four bytes in memory order.
    const rotated = new Uint8Array(4);
    for (let j = 0; j < 4; j++) rotated[j] = key[(i + j) & 3]!;
    const word = new Uint32Array(rotated.buffer)[0]!;
    const view = new Uint32Array(buffer.buffer, buffer.byteOffset + start + i, words);
    for (let w = 0; w < words; w++) view[w]! ^= word;
    i += words * 4;
  }
  for (; i < length; i++) buffer[start + i]! ^= key[i & 3]!;
}

/** Bytes of the WebSocket header before the payload, for a payload of `length` bytes. */
function headerLength(length: number, masked: boolean): number {
  return (length < 126 ? 2 : length < 65536 ? 4 : 10) + (masked ? 4 : 0);
}

export class BinaryMessageWriter {
  private maskPool = new Uint8Array(0);
  private maskAt = 0;

  /**
   * `masked`: this side is the client of the WebSocket, whose every frame is masked with a fresh
   * random key (RFC 6455 §5.3: the key must be unpredictable, so it is never skipped or reused).
   */
  constructor(
    private readonly sink: ByteSink,
    readonly masked: boolean,
  ) {}

  /** Writes one binary message whose payload is `parts` in order (the frame's header, then its payload). */
  write(parts: readonly Uint8Array[]): void {
    let length = 0;
    for (const part of parts) length += part.length;
    const offset = headerLength(length, this.masked);
    const message = Buffer.allocUnsafe(offset + length);
    message[0] = FIN_BINARY;
    let at = 2;
    if (length < 126) message[1] = length;
    else if (length < 65536) {
      message[1] = 126;
      message.writeUInt16BE(length, 2);
      at = 4;
    } else {
      message[1] = 127;
      // Lengths here stay far below 2^53: the high half is what is above 2^32.
      message.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
      message.writeUInt32BE(length >>> 0, 6);
      at = 10;
    }
    if (!this.masked) {
      for (const part of parts) {
        message.set(part, at);
        at += part.length;
      }
      this.sink.write(message);
      return;
    }
    message[1]! |= MASK_BIT;
    const from = this.nextMask();
    const key = this.maskPool.subarray(from, from + 4);
    message.set(key, at);
    at += 4;
    for (const part of parts) {
      message.set(part, at);
      at += part.length;
    }
    maskInPlace(message, at - length, length, key);
    this.sink.write(message);
  }

  /** Where in `maskPool` a fresh masking key starts: four bytes of the platform's cryptographic random source, each used once. */
  private nextMask(): number {
    if (this.maskAt + 4 > this.maskPool.length) {
      this.maskPool = new Uint8Array(MASK_POOL_BYTES);
      globalThis.crypto.getRandomValues(this.maskPool);
      this.maskAt = 0;
    }
    const from = this.maskAt;
    this.maskAt += 4;
    return from;
  }
}
