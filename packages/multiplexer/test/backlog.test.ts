// BacklogHold: one stream's hysteresis on the connection's counted pause.
import { describe, expect, it } from "vitest";
import { BacklogHold } from "../src/index.js";

function counter() {
  const state = { pauses: 0, resumes: 0, held: 0 };
  const pause = () => {
    state.pauses++;
    state.held++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      state.resumes++;
      state.held--;
    };
  };
  return { state, pause };
}

describe("BacklogHold", () => {
  it("holds once above the high-water mark, keeps holding down to the low one, releases at it", () => {
    const { state, pause } = counter();
    const changes: boolean[] = [];
    const hold = new BacklogHold(pause, 100, 25, (holding) => changes.push(holding));
    hold.update(100);
    expect(state.held).toBe(0);
    hold.update(101);
    hold.update(500);
    expect(state).toEqual({ pauses: 1, resumes: 0, held: 1 });
    hold.update(60);
    expect(hold.holding).toBe(true);
    hold.update(25);
    expect(state).toEqual({ pauses: 1, resumes: 1, held: 0 });
    hold.update(80);
    expect(hold.holding).toBe(false);
    hold.update(101);
    expect(hold.holds).toBe(2);
    expect(changes).toEqual([true, false, true]);
  });

  it("dispose releases what it holds, once; two holds on one counted pause release it only when both have", () => {
    const { state, pause } = counter();
    const a = new BacklogHold(pause, 10, 0);
    const b = new BacklogHold(pause, 10, 0);
    a.update(11);
    b.update(11);
    expect(state.held).toBe(2);
    a.dispose();
    a.dispose();
    expect(state.held).toBe(1);
    b.update(0);
    expect(state).toEqual({ pauses: 2, resumes: 2, held: 0 });
  });

  it("refuses a low-water mark that is not below the high one", () => {
    expect(() => new BacklogHold(counter().pause, 10, 10)).toThrow(RangeError);
  });
});
