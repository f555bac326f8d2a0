// The vault and command part of `pnpm demo` runs to its end and shows each step's answer, on both
// transports where each exists.
import { describe, expect, it } from "vitest";
import { runVaultDemo } from "../src/vault.js";

describe("pnpm demo: vault and command", () => {
  it("stores, reads, locks and unlocks a key on /requests and on the begin scope, and runs a command", async () => {
    let out = "";
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
      return true;
    }) as typeof process.stdout.write;
    try {
      await runVaultDemo();
    } finally {
      process.stdout.write = write;
    }
    const lines = out.split("\n").map((line) => line.trim().replace(/\s+/g, " "));
    const after = (marker: string) => lines.slice(lines.indexOf(marker));
    const onRequests = after("-- on /requests (no provider has begun tools on /)");
    const onScope = after("-- on the begin scope (a provider has begun tools on /)");
    expect(onScope.length).toBeGreaterThan(0);
    for (const expected of [
      "provider (/requests) vaultSet \"greeting\"",
      "→ answer 200 \"hello from the program\"",
      "→ answer 404 \"no value under the key\\n\"",
      "provider (/requests) vaultLock \"greeting\"",
      "provider (/requests) vaultUnlock \"greeting\"",
      "→ answer 502 \"the lock on \\\"greeting\\\" is not held by this container\"",
      "→ line {\"item\":\"U1RPUkU=\"} (item \"STORE\")",
      "→ line {\"item\":\"VU5MT0NL\"} (item \"UNLOCK\")",
      "→ line {\"end\":\"done\"}",
    ]) expect(onRequests).toContain(expected);
    for (const expected of [
      "provider (begin scope) vaultGet \"greeting\"",
      "→ answer 200 \"hello from the program\"",
      "→ answer 200 \"hello again, over the begin scope\"",
      // ttl 0 is refused by the proxy itself (400), before any ask reaches the provider.
      "→ answer 400 \"ttl must be a number of seconds from 1 to 4294967295\\n\"",
      "provider (begin scope) vaultLock \"greeting\"",
      "provider (begin scope) vaultUnlock \"greeting\"",
      "provider (begin scope) vaultDelete \"greeting\"",
      "→ lines 4 (3 items and the end)",
    ]) expect(onScope).toContain(expected);
    // Once begun, no vault ask goes on /requests.
    expect(onScope.some((line) => line.startsWith("provider (/requests)"))).toBe(false);
  }, 120_000);
});
