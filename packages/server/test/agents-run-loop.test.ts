// The run loop's driver (agents.md §6.2) event by event, against a program of the test's own whose every
// call waits until the test answers it: each event's effect on the queue, the in-flight delivery, the
// run state and `halted`, without sockets or timing. (The same rules over real sockets with the example
// agent: agents.test.ts, agents-misbehave.test.ts.)
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "@diverge/codec";
import { RUN_CALL_DIED, RunLoop, type AgentProgram, type Delivery, type Fate, type ProgramDequeue, type RunStart } from "../src/families/agents/run-loop.js";
import { sseEvents } from "../src/families/agents/sse.js";

interface Pending<T> {
  readonly arguments: unknown;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** A program whose calls wait for the test, and an event stream the test writes. */
function scriptedProgram() {
  const runs: Pending<RunStart>[] = [];
  const enqueues: Pending<Delivery>[] = [];
  const dequeues: Pending<ProgramDequeue>[] = [];
  let wake: (() => void) | undefined;
  const changed = () => {
    wake?.();
    wake = undefined;
  };
  const pending = <T>(list: Pending<T>[], args: unknown, signal: AbortSignal) =>
    new Promise<T>((resolve, reject) => {
      list.push({ arguments: args, resolve, reject });
      signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      changed();
    });
  const program: AgentProgram = {
    run: (messages, signal) => pending(runs, messages.map((m) => m.key), signal),
    enqueue: (message, signal) => pending(enqueues, message.key, signal),
    dequeue: (key, signal) => pending(dequeues, key, signal),
  };
  /** Resolves once `predicate` holds (re-checked after every call the driver makes and every fate). */
  const until = async (predicate: () => boolean) => {
    while (!predicate()) await new Promise<void>((resolve) => (wake = resolve));
  };
  return { program, runs, enqueues, dequeues, until, changed };
}

/** An event stream the test feeds: `push(data)`, `end()`, `die()`. */
function stream() {
  const items: (string | Error | null)[] = [];
  let wake: (() => void) | undefined;
  const put = (item: string | Error | null) => {
    items.push(item);
    wake?.();
  };
  return {
    push: (data: string) => put(data),
    end: () => put(null),
    die: () => put(new Error("the stream died")),
    events: (async function* () {
      for (;;) {
        while (items.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        const item = items.shift()!;
        if (item === null) return;
        if (item instanceof Error) throw item;
        yield item;
      }
    })(),
  };
}

const message = (key: string): AgentMessage => ({ key, content: [{ type: "text", text: key }] });
const flush = () => new Promise((resolve) => setImmediate(resolve));

function driver(options: { gateOpen?: boolean } = {}) {
  const scripted = scriptedProgram();
  const aborter = new AbortController();
  const fates = new Map<string, Fate[]>();
  const chunks: string[] = [];
  let open = options.gateOpen ?? true;
  let opened!: () => void;
  const whenOpen = new Promise<void>((resolve) => (opened = resolve));
  const gate = {
    get isOpen() {
      return open;
    },
    pass: () => (open ? Promise.resolve() : whenOpen),
  };
  const loop = new RunLoop({ program: scripted.program, gate, signal: aborter.signal, log: () => {}, chunk: (data) => void chunks.push(data) });
  const enqueue = (name: string, key = name) =>
    loop.enqueue(message(key), (fate) => {
      fates.set(name, [...(fates.get(name) ?? []), fate]);
      scripted.changed();
    });
  return {
    ...scripted,
    loop,
    fates,
    chunks,
    enqueue,
    openGate: () => {
      open = true;
      opened();
    },
    abort: () => aborter.abort(),
  };
}

describe("the run loop's driver (agents.md §6.2)", () => {
  it("enqueue while idle → POST /run with every waiting message; 2xx → all delivered, the stream relayed in order; its end → idle, the next loop on whatever waits", async () => {
    const d = driver({ gateOpen: false });
    d.enqueue("a");
    d.enqueue("b");
    await flush();
    expect(d.runs).toHaveLength(0);
    d.openGate();
    await d.until(() => d.runs.length === 1);
    expect(d.runs[0]!.arguments).toEqual(["a", "b"]);
    expect(d.loop.status.phase).toBe("starting");
    const s = stream();
    d.runs[0]!.resolve({ ok: true, events: s.events });
    await flush();
    expect(d.fates.get("a")).toEqual([{ variant: "Delivered" }]);
    expect(d.fates.get("b")).toEqual([{ variant: "Delivered" }]);
    s.push("1");
    s.push("2");
    d.enqueue("c");
    await d.until(() => d.enqueues.length === 1);
    s.end();
    d.enqueues[0]!.resolve({ type: "missed" });
    await d.until(() => d.runs.length === 2);
    expect(d.chunks).toEqual(["1", "2"]);
    expect(d.runs[1]!.arguments).toEqual(["c"]);
  });

  it("/run non-2xx or unreachable → every batch message refused with that one error; /run that died → the spec's error", async () => {
    const d = driver();
    d.enqueue("a");
    await d.until(() => d.runs.length === 1);
    d.enqueue("b");
    d.enqueue("c");
    d.runs[0]!.resolve({ ok: false, error: { kind: "program", status: 500 } });
    await d.until(() => d.runs.length === 2);
    expect(d.fates.get("a")).toEqual([{ variant: "Refused", error: { kind: "program", status: 500 } }]);
    // The post-step starts the next run at once on what arrived meanwhile.
    expect(d.runs[1]!.arguments).toEqual(["b", "c"]);
    d.runs[1]!.reject(new Error("vanished"));
    await d.until(() => d.fates.has("c"));
    expect(d.fates.get("b")).toEqual([{ variant: "Refused", error: RUN_CALL_DIED }]);
    expect(d.fates.get("c")).toEqual([{ variant: "Refused", error: RUN_CALL_DIED }]);
    expect(d.loop.status.phase).toBe("idle");
  });

  it("one delivery at a time; delivered/dequeued/4xx; missed, 5xx or garbage → back at the front and halted until the loop ends", async () => {
    const d = driver();
    d.enqueue("a");
    await d.until(() => d.runs.length === 1);
    const s = stream();
    d.runs[0]!.resolve({ ok: true, events: s.events });
    for (const name of ["b", "c", "d", "e", "f"]) d.enqueue(name);
    await d.until(() => d.enqueues.length === 1);
    expect(d.enqueues.map((e) => e.arguments)).toEqual(["b"]);
    d.enqueues[0]!.resolve({ type: "delivered" });
    await d.until(() => d.enqueues.length === 2);
    d.enqueues[1]!.resolve({ type: "dequeued" });
    await d.until(() => d.enqueues.length === 3);
    d.enqueues[2]!.resolve({ type: "refused", error: { status: 422 } });
    await d.until(() => d.enqueues.length === 4);
    d.enqueues[3]!.resolve({ type: "failed", error: { status: 503 } });
    await flush();
    expect(d.fates.get("b")).toEqual([{ variant: "Delivered" }]);
    expect(d.fates.get("c")).toEqual([{ variant: "Dequeued" }]);
    expect(d.fates.get("d")).toEqual([{ variant: "Refused", error: { status: 422 } }]);
    expect(d.fates.has("e")).toBe(false);
    expect(d.loop.status).toMatchObject({ phase: "active", halted: true, inFlight: false, queued: 2 });
    expect(d.enqueues).toHaveLength(4);
    s.end();
    await d.until(() => d.runs.length === 2);
    // e went back to the front: the next loop starts on e, then f.
    expect(d.runs[1]!.arguments).toEqual(["e", "f"]);
    expect(d.loop.status.halted).toBe(false);
  });

  it("dequeue: queued messages under the key answered dequeued at once; the one in flight marked withdrawn (missed → dequeued); a starting batch is not withdrawn", async () => {
    const d = driver();
    d.enqueue("a", "k");
    await d.until(() => d.runs.length === 1);
    // Starting: a dequeue does not reach the batch, and no loop is active to ask.
    expect(await d.loop.dequeue("k")).toEqual({ variant: "Nothing" });
    const s = stream();
    d.runs[0]!.resolve({ ok: true, events: s.events });
    d.enqueue("b", "k");
    d.enqueue("c", "k");
    d.enqueue("d", "other");
    await d.until(() => d.enqueues.length === 1);
    const dequeued = d.loop.dequeue("k");
    await d.until(() => d.dequeues.length === 1);
    expect(d.fates.get("c")).toEqual([{ variant: "Dequeued" }]);
    expect(d.fates.has("b")).toBe(false);
    d.dequeues[0]!.resolve({ type: "empty" });
    expect(await dequeued).toEqual({ variant: "Withdrew" });
    d.enqueues[0]!.resolve({ type: "missed" });
    await d.until(() => d.enqueues.length === 2);
    expect(d.fates.get("b")).toEqual([{ variant: "Dequeued" }]);
    expect(d.enqueues[1]!.arguments).toBe("other");
    expect(d.fates.get("a")).toEqual([{ variant: "Delivered" }]);
    // The program's failure to say: Failed with its words.
    const failed = d.loop.dequeue("nobody");
    await d.until(() => d.dequeues.length === 2);
    d.dequeues[1]!.resolve({ type: "failed", error: { kind: "agent", error: "the outcome did not parse: x" } });
    expect(await failed).toEqual({ variant: "Failed", error: { kind: "agent", error: "the outcome did not parse: x" } });
  });

  it("a stream that dies ends the relay as a clean end does", async () => {
    const d = driver();
    d.enqueue("a");
    await d.until(() => d.runs.length === 1);
    const s = stream();
    d.runs[0]!.resolve({ ok: true, events: s.events });
    s.push("x");
    s.die();
    d.enqueue("b");
    await d.until(() => d.runs.length === 2 || d.enqueues.length === 1);
    if (d.enqueues.length === 1) {
      d.enqueues[0]!.resolve({ type: "missed" });
      await d.until(() => d.runs.length === 2);
    }
    expect(d.runs[1]!.arguments).toEqual(["b"]);
  });

  it("the connection ending aborts every call and answers nothing more", async () => {
    const d = driver();
    d.enqueue("a");
    await d.until(() => d.runs.length === 1);
    const s = stream();
    d.runs[0]!.resolve({ ok: true, events: s.events });
    d.enqueue("b");
    d.enqueue("c");
    await d.until(() => d.enqueues.length === 1);
    const rejected = Promise.allSettled([d.enqueues[0]!]);
    d.abort();
    await rejected;
    s.push("late");
    d.enqueue("d");
    await flush();
    expect(d.loop.status.ended).toBe(true);
    expect([...d.fates.keys()]).toEqual(["a"]);
    expect(d.runs).toHaveLength(1);
    expect(d.chunks).toEqual([]);
  });
});

describe("the event stream reader", () => {
  const feed = async (parts: string[]) => {
    const out: unknown[] = [];
    const body = (async function* () {
      for (const part of parts) yield new TextEncoder().encode(part);
    })();
    for await (const item of sseEvents(body, 100)) out.push(item);
    return out;
  };

  it("joins data lines with a line feed; ignores comments, other fields and an event left open at the end; CRLF split across reads", async () => {
    expect(await feed(["data: a\ndata:b\n", "\n: comment\nevent: x\nid: 1\ndata: c\r", "\n\r\ndata: open"])).toEqual([{ data: "a\nb" }, { data: "c" }]);
  });

  it("dispatches an empty data, not an event with no data; counts an event over the limit", async () => {
    expect(await feed(["data:\n\nevent: only\n\n", `data: ${"x".repeat(200)}\n\n`])).toEqual([{ data: "" }, { oversized: 200 }]);
  });
});
