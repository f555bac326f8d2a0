// Which revision a party speaks: the newest spoken by default, a spoken one on request, a typed
// refusal for anything else.
import { revisions } from "@diverge/codec";
import { describe, expect, it } from "vitest";
import { RevisionError, SPOKEN_REVISIONS, speakRevision } from "../src/index.js";

describe("speakRevision", () => {
  it("defaults to the newest revision spoken, which the codec knows", () => {
    expect(speakRevision()).toBe(SPOKEN_REVISIONS[SPOKEN_REVISIONS.length - 1]);
    for (const revision of SPOKEN_REVISIONS) expect(revisions).toContain(revision);
  });

  it("speaks a spoken revision on request", () => {
    expect(speakRevision("2.3.0")).toBe("2.3.0");
  });

  it("refuses any other with a typed error naming what is spoken", () => {
    expect(() => speakRevision("2.4.0")).toThrow(RevisionError);
    expect(() => speakRevision("2.4.0")).toThrow("revision 2.4.0 is not spoken here: the transports speak 2.3.0");
  });
});
