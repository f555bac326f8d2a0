// Byte mutations that bend well-formed frames just out of shape: the places decoders go wrong are
// lengths, tags, prefixes and the JSON after them.

/** A small deterministic PRNG (xorshift32), so a run is reproducible from its seed. */
export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state;
  }
  below(n: number): number {
    return n <= 0 ? 0 : this.next() % n;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)]!;
  }
}

const INTERESTING = [0x00, 0x01, 0x02, 0x07, 0x08, 0x09, 0x0b, 0x0c, 0x12, 0x13, 0x7f, 0x80, 0xc0, 0xc3, 0xed, 0xf4, 0xfe, 0xff];
const TOKENS = ["{", "}", "[", "]", '"', ":", ",", "null", "true", "-", "0", "1e999", "\\u", "\\ud800", "\\udc00", "\\ud83d\\ude00", "1e99999999999", "__proto__", "constructor", "\u0000", "\u2028", "\ufffd"].map((t) => new TextEncoder().encode(t));

function splice(base: Uint8Array, at: number, remove: number, insert: Uint8Array): Uint8Array {
  const out = new Uint8Array(base.length - remove + insert.length);
  out.set(base.subarray(0, at), 0);
  out.set(insert, at);
  out.set(base.subarray(at + remove), at + insert.length);
  return out;
}

/** One to four mutations of `base`, sometimes crossed with `other`. */
export function mutate(random: Random, base: Uint8Array, other: Uint8Array): Uint8Array {
  let out = base;
  const rounds = 1 + random.below(4);
  for (let r = 0; r < rounds; r++) {
    const at = random.below(out.length + 1);
    switch (random.below(11)) {
      case 0: // flip a bit
        if (out.length > 0) {
          out = out.slice();
          const i = random.below(out.length);
          out[i] = out[i]! ^ (1 << random.below(8));
        }
        break;
      case 1: // an interesting byte
        if (out.length > 0) {
          out = out.slice();
          out[random.below(out.length)] = random.pick(INTERESTING);
        }
        break;
      case 2: // insert a byte
        out = splice(out, at, 0, Uint8Array.of(random.below(256)));
        break;
      case 3: // delete a run
        out = splice(out, at, Math.min(out.length - at, 1 + random.below(4)), new Uint8Array(0));
        break;
      case 4: // truncate
        out = out.slice(0, at);
        break;
      case 5: // a JSON-ish token
        out = splice(out, at, 0, random.pick(TOKENS));
        break;
      case 6: // duplicate a chunk
        if (out.length > 0) {
          const from = random.below(out.length);
          out = splice(out, at, 0, out.slice(from, from + 1 + random.below(16)));
        }
        break;
      case 7: // cross over with another input
        out = Uint8Array.from([...out.subarray(0, at), ...other.subarray(random.below(other.length + 1))]);
        break;
      case 8: // a big-endian length or id at its extremes
        if (out.length >= 2) {
          out = out.slice();
          const i = random.below(out.length - 1);
          const v = random.pick([0, 1, 0xff, 0x7fff, 0xffff]);
          out[i] = v >>> 8;
          out[i + 1] = v & 0xff;
        }
        break;
      case 9: // deep nesting
        out = splice(out, at, 0, new TextEncoder().encode("[".repeat(1 + random.below(5000))));
        break;
      default: // random bytes
        out = splice(out, at, 0, Uint8Array.from({ length: 1 + random.below(8) }, () => random.below(256)));
    }
  }
  return out;
}
