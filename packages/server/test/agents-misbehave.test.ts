// The run loop against a program that misbehaves (the example agent's modes, over real sockets):
// 5xx, a 2xx that is not an event stream, garbage SSE, chunks of no known type, a stream that dies,
// fates and outcomes that do not parse, a program that restarts. Every garbage becomes the spec's
// error value (never a crash), every fate reaches its enqueue channel exactly once, and the queue
// goes on.
import { describe, expect, it } from "vitest";
import { agentContainer, answeredOnce, begin, chunksUntil, connect, dequeue, enqueue, fate, userPartOf } from "./agents-support.js";

const notification = (chunk: Record<string, unknown>) => chunk.type === "notification" && (chunk.message as { kind?: string } | null)?.kind === "agent";

describe("a program that misbehaves", () => {
  it("run-5xx: every message of the batch is refused with the program's words; the queue goes on", async () => {
    const container = await agentContainer({ misbehave: ["run-5xx"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    const refused = await fate(raw, 0);
    expect(refused).toMatchObject({ variant: "Refused", error: { kind: "program", status: 500 } });
    container.agent.misbehave([]);
    enqueue(raw, 1, "k2", "hello");
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    answeredOnce(raw, [0, 1]);
  });

  it("run-not-sse: a 2xx that is not an event stream starts no loop; the batch is refused", async () => {
    const container = await agentContainer({ misbehave: ["run-not-sse"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    const refused = await fate(raw, 0);
    expect(refused).toMatchObject({ variant: "Refused", error: { kind: "agent", status: 200 } });
    expect(String((refused as { error: { error: string } }).error.error)).toMatch(/not an event stream/);
  });

  it("garbage-sse: each event that is not a chunk becomes a notification carrying the error value; the next loop runs", async () => {
    const container = await agentContainer({ misbehave: ["garbage-sse"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    await container.agent.whenIdle();
    container.agent.misbehave([]);
    enqueue(raw, 1, "k2", "again");
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    const chunks = await chunksUntil(raw, userPartOf("k2"));
    expect(chunks[0]).toMatchObject({ type: "user_text_content", key: "k1" });
    const errors = chunks.filter(notification);
    expect(errors.length).toBeGreaterThanOrEqual(3);
    for (const error of errors) {
      expect(error.is_fatal).toBe(false);
      expect(String((error.message as { error: string }).error)).toMatch(/^agentic loop chunk did not parse: /);
    }
  });

  it("unknown-chunk: JSON that is none of the fourteen chunks becomes the error value too", async () => {
    const container = await agentContainer({ misbehave: ["unknown-chunk"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    await fate(raw, 0);
    await container.agent.whenIdle();
    container.agent.misbehave([]);
    enqueue(raw, 1, "k2", "again");
    await fate(raw, 1);
    const chunks = await chunksUntil(raw, userPartOf("k2"));
    expect(chunks.filter(notification).length).toBeGreaterThanOrEqual(4);
  });

  it("die-mid-stream: a stream that dies ends the relay as a clean end does; the next loop starts", async () => {
    const container = await agentContainer({ misbehave: ["die-mid-stream"] });
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "hello");
    expect(await fate(raw, 0)).toEqual({ variant: "Delivered" });
    await chunksUntil(raw, (chunk) => chunk.type === "assistant_reasoning");
    await container.agent.whenIdle();
    container.agent.misbehave([]);
    enqueue(raw, 1, "k2", "again");
    expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
    await chunksUntil(raw, userPartOf("k2"));
    expect(container.agent.runs).toBe(2);
  });

  for (const mode of ["enqueue-5xx", "enqueue-missed", "fate-garbage", "fate-not-json"]) {
    it(`${mode}: the delivery goes back to the front, the loop is halted, and the next loop starts on it`, async () => {
      const container = await agentContainer({ misbehave: [mode] });
      const raw = await connect(container);
      await begin(raw, {});
      enqueue(raw, 0, "k1", "pause\nfirst");
      await fate(raw, 0);
      await container.agent.whenPaused();
      enqueue(raw, 1, "k2", "second");
      // The garbled fates answer at the seam; the others at once.
      if (mode.startsWith("fate-")) {
        await container.agent.whenHeld(1);
        container.agent.release();
      } else {
        await container.logged(/a delivery into the loop in flight was not taken/);
        // A message after it is not delivered into the halted loop: it waits behind k2.
        enqueue(raw, 2, "k3", "third");
        await container.logged(/a delivery into the loop in flight was not taken/);
        await dequeue(raw, 9, "nobody");
        expect(container.proxy.multiplexed.connection!.families.agentLoop!.status).toMatchObject({ phase: "active", halted: true, queued: 2, inFlight: false });
        container.agent.release();
      }
      expect(await fate(raw, 1)).toEqual({ variant: "Delivered" });
      await chunksUntil(raw, userPartOf("k2"));
      expect(container.agent.calls.filter((call) => call === "POST /enqueue")).toHaveLength(1);
      expect(container.agent.calls.filter((call) => call === "POST /run")).toHaveLength(2);
      answeredOnce(raw, [0, 1]);
      if (!mode.startsWith("fate-")) {
        expect(await fate(raw, 2)).toEqual({ variant: "Delivered" });
        answeredOnce(raw, [2]);
      }
    });
  }

  it("dequeue-5xx and dequeue-garbage: the dequeue answers Failed with the error value", async () => {
    for (const [mode, expected] of [
      ["dequeue-5xx", { kind: "program", status: 500 }],
      ["dequeue-garbage", { kind: "agent" }],
      ["dequeue-not-json", { kind: "agent" }],
    ] as const) {
      const container = await agentContainer({ misbehave: [mode] });
      const raw = await connect(container);
      await begin(raw, {});
      enqueue(raw, 0, "k1", "pause\nfirst");
      await fate(raw, 0);
      await container.agent.whenPaused();
      const answer = await dequeue(raw, 1, "k1");
      expect(answer).toMatchObject({ variant: "Failed", error: expected });
      if (mode !== "dequeue-5xx") expect(String((answer as { error: { error: string } }).error.error)).toMatch(/^the outcome did not parse: /);
      container.agent.release();
      await container.agent.whenIdle();
    }
  });

  it("exit-after:N: a program that restarts mid-loop; the held delivery fails, goes back, and the next /run is refused by the restarted program — every fate once", async () => {
    const container = await agentContainer();
    const raw = await connect(container);
    await begin(raw, {});
    enqueue(raw, 0, "k1", "pause\nfirst");
    await fate(raw, 0);
    await container.agent.whenPaused();
    enqueue(raw, 1, "k2", "second");
    await container.agent.whenHeld(1);
    // The next event written kills it: the stream and the held /enqueue die with it.
    container.agent.misbehave([`exit-after:${container.agent.events + 1}`]);
    container.agent.release();
    await container.agent.whenRestarted(1);
    // The next loop's /run finds the program gone (not listening yet) or back and unregistered: refused either way.
    const refused = await fate(raw, 1);
    expect(refused.variant).toBe("Refused");
    expect(["unregistered", "program"]).toContain((refused as { error: { kind: string } }).error.kind);
    answeredOnce(raw, [0, 1]);
    // Not stuck: the next message gets its fate too.
    container.agent.misbehave([]);
    enqueue(raw, 2, "k3", "third");
    expect((await fate(raw, 2)).variant).toBe("Refused");
  });
});
