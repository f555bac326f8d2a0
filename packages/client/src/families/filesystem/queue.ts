// A bounded queue read as an async iterable: what a transport pushes, the caller pulls.
import { BacklogHold } from "@diverge/multiplexer";

export class PushQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private done = false;
  private failure: unknown;
  private wake: (() => void) | undefined;

  /** `stop` is called when the reader stops early (break, return) or the queue overflows. */
  constructor(
    private readonly limit: number,
    private readonly overflow: () => unknown,
    private readonly stop: () => void,
  ) {}

  push(item: T): void {
    if (this.done) return;
    if (this.items.length >= this.limit) {
      this.fail(this.overflow());
      this.stop();
      return;
    }
    this.items.push(item);
    this.poke();
  }

  end(): void {
    this.done = true;
    this.poke();
  }

  fail(problem: unknown): void {
    if (this.done) return;
    this.failure = problem;
    this.done = true;
    this.poke();
  }

  get ended(): boolean {
    return this.done;
  }

  private poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        const item = this.items.shift();
        if (item !== undefined) {
          yield item;
          continue;
        }
        if (this.done) {
          if (this.failure !== undefined) throw this.failure;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      if (!this.done) {
        this.done = true;
        this.stop();
      }
    }
  }
}

/** The most bytes one content piece carries: the proxy's read piece size. */
export const PIECE_SIZE = 2 * 1024 * 1024;

/** What `write` takes: bytes, an async or sync iterable of them, or a WHATWG ReadableStream. */
export type WriteSource = Uint8Array | string | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array> | ReadableStream<Uint8Array>;

/** The content as pieces of at most PIECE_SIZE bytes. */
export async function* piecesOf(content: WriteSource): AsyncGenerator<Uint8Array, void, void> {
  if (typeof content === "string") content = new TextEncoder().encode(content);
  if (content instanceof Uint8Array) {
    for (let at = 0; at < content.length; at += PIECE_SIZE) yield content.subarray(at, at + PIECE_SIZE);
    return;
  }
  const source: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array> =
    typeof (content as ReadableStream<Uint8Array>).getReader === "function" && !(Symbol.asyncIterator in content) ? readerIterable(content as ReadableStream<Uint8Array>) : (content as AsyncIterable<Uint8Array>);
  for await (const chunk of source) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
    for (let at = 0; at < bytes.length; at += PIECE_SIZE) yield bytes.subarray(at, at + PIECE_SIZE);
  }
}

async function* readerIterable(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array, void, void> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** Bytes a read stream holds for a reader that does not take them before it pauses its source. */
export const READ_HIGH_WATER = 8 * 1024 * 1024;
/** Bytes waiting for the reader at or below which a paused source reads on. */
export const READ_LOW_WATER = READ_HIGH_WATER / 4;

/** What a read stream pauses while its reader lags: `pause` stops the source and returns its resume. */
export interface ByteFlow {
  pause(): () => void;
  /** Told the bytes waiting for the reader after each piece and each time the reader asks for more. */
  queued?(bytes: number): void;
}

/**
 * A WHATWG ReadableStream fed by `start`, which pushes pieces and ends or fails it; `cancel` runs when
 * the reader gives up. With `flow`, once more than READ_HIGH_WATER bytes wait for the reader the
 * source is paused (a BacklogHold), and resumed once the reader has taken all but READ_LOW_WATER of
 * them: a reader slower than the wire makes the sender wait instead of this stream holding the whole file.
 */
export function byteStream(start: (sink: { piece(bytes: Uint8Array): void; end(): void; fail(error: unknown): void }) => void, cancel: () => void, flow?: ByteFlow): ReadableStream<Uint8Array> {
  // Over once ended, failed or cancelled: the controller takes nothing after.
  let over = false;
  const hold = flow ? new BacklogHold(() => flow.pause(), READ_HIGH_WATER, READ_LOW_WATER) : undefined;
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  // What waits for the reader: the queue's size is its high-water mark less the room left.
  const measure = () => {
    if (!flow || !controller || over) return;
    const waiting = Math.max(0, READ_HIGH_WATER - (controller.desiredSize ?? READ_HIGH_WATER));
    flow.queued?.(waiting);
    hold!.update(waiting);
  };
  const finish = () => {
    over = true;
    flow?.queued?.(0);
    hold?.dispose();
  };
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        start({
          piece: (bytes) => {
            if (over) return;
            c.enqueue(bytes);
            measure();
          },
          end: () => {
            if (over) return;
            finish();
            c.close();
          },
          fail: (error) => {
            if (over) return;
            finish();
            c.error(error);
          },
        });
      },
      // The reader took some: once little enough waits, what was paused for it reads on.
      pull: measure,
      cancel: () => {
        finish();
        cancel();
      },
    },
    { highWaterMark: READ_HIGH_WATER, size: (chunk) => chunk.byteLength },
  );
}
