// The log lines of `--log-format json` and text (@diverge/multiplexer/log): a secret is redacted in
// every form a line can carry it, and outside text is a field, never the line's structure. The
// property tests draw secrets with quotes, backslashes, controls, non-ASCII, astral characters and
// `%`, encode them with encoders written here (not the redactor's own list), bury them in random
// text, and check the written line for every form — as written and as JSON decodes it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonLogLine, logEvent, Redactor, textLogLine } from "@diverge/multiplexer/log";

const json = (text: string) => JSON.stringify(text).slice(1, -1);
const hexEscapes = (text: string, upper: boolean) =>
  json(text).replace(/[\u007f-\uffff]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, "0");
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  });
const lowerPercent = (text: string) => text.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase());
const base64 = (text: string) => Buffer.from(text).toString("base64");

/** What a secret passes through on its way to a line: each an everyday encoder. */
const ENCODERS: Record<string, (text: string) => string> = {
  raw: (text) => text,
  json,
  jsonAsciiLower: (text) => hexEscapes(text, false),
  jsonAsciiUpper: (text) => hexEscapes(text, true),
  jsonSlash: (text) => json(text).replace(/\//g, "\\/"),
  uriComponent: encodeURIComponent,
  uriComponentLower: (text) => lowerPercent(encodeURIComponent(text)),
  uri: encodeURI,
  uriLower: (text) => lowerPercent(encodeURI(text)),
  form: (text) => new URLSearchParams([["k", text]]).toString().slice(2),
  base64,
  base64Unpadded: (text) => base64(text).replace(/=+$/, ""),
  base64url: (text) => Buffer.from(text).toString("base64url"),
  base64urlPadded: (text) => base64(text).replace(/\+/g, "-").replace(/\//g, "_"),
};
/** The text encoders (base64 applies to the raw value only). */
const TEXT = ["raw", "json", "jsonAsciiLower", "jsonAsciiUpper", "jsonSlash", "uriComponent", "uriComponentLower", "uri", "uriLower", "form"];

/** Whether a lone surrogate makes encodeURI throw (such a secret has no percent form). */
const encodable = (text: string) => {
  try {
    encodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
};

/** Every form of `secret` a check looks for: each encoder, and each text encoder over each text encoder. */
function forms(secret: string): string[] {
  const out = new Set<string>();
  for (const [name, encode] of Object.entries(ENCODERS)) {
    if (!encodable(secret) && name.startsWith("uri")) continue;
    if (!encodable(secret) && name === "form") continue;
    out.add(encode(secret));
  }
  for (const first of TEXT) for (const second of TEXT) if (encodable(secret)) out.add(ENCODERS[second]!(ENCODERS[first]!(secret)));
  return [...out].filter((form) => form.length > 0);
}

/** Every base64 run of `text`, decoded at each of its 4 alignments (standard and url alphabets). */
function base64Decodings(text: string): Buffer[] {
  const runs = text.match(/[A-Za-z0-9+/_-]{2,}=*/g) ?? [];
  return runs.flatMap((run) => [0, 1, 2, 3].map((offset) => Buffer.from(run.slice(offset).replace(/-/g, "+").replace(/_/g, "/"), "base64")));
}

function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.entries(value).flatMap(([key, item]) => [key, ...strings(item)]);
  return [];
}

/** Fails when `line` (a written line, "" when withheld) holds `secret` in any form, or JSON-decodes to one. */
function expectNoForm(line: string, secret: string, decoded: unknown): void {
  const texts = [line, ...strings(decoded)];
  const found = forms(secret).flatMap((form) => texts.filter((text) => text.includes(form)).map((text) => `${JSON.stringify(form)} in ${JSON.stringify(text)}`));
  expect(found).toEqual([]);
  const bytes = Buffer.from(secret);
  // Base64 inside longer base64 (a Basic header of user:secret): only a value of 5 bytes and more leaves
  // 6 characters of its own at every alignment; shorter ones are searched as their own base64 only.
  if (bytes.length >= 5) expect(texts.filter((text) => base64Decodings(text).some((run) => run.includes(bytes)))).toEqual([]);
}

const special = fc.constantFrom('"', "\\", "\n", "\r", "\t", "\u0000", "\u001b", "%", "%2F", "/", "+", "=", " ", "&", "é", "€", "😀", "\u2028", "\ud800", "'", "<", "[", "]");
const secretArb = fc
  .array(fc.oneof(special, fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 4 }), fc.string({ unit: "binary", minLength: 1, maxLength: 2 })), { minLength: 2, maxLength: 8 })
  .map((parts) => parts.join(""))
  .filter((secret) => secret.length >= 3);
const surrounding = fc.string({ unit: "grapheme", maxLength: 12 });
const encoding = fc.oneof(
  fc.constantFrom(...Object.keys(ENCODERS)).map((name) => [name]),
  fc.tuple(fc.constantFrom(...TEXT), fc.constantFrom(...TEXT)),
  // Base64 of the value inside a longer base64 text, at each alignment: a Basic header of `user:secret`.
  fc.constantFrom("", "u", "us", "usr", "user:").map((prefix) => [`base64:${prefix}`]),
);
const encode = (secret: string, chain: string[]) =>
  chain.reduce((text, name) => (name.startsWith("base64:") ? base64(`${name.slice(7)}${text}`) : ENCODERS[name]!(text)), secret);

describe("the redactor", () => {
  it("leaves no form of a secret in a JSON line, whatever encodes it and whatever surrounds it (property)", { timeout: 120_000 }, () => {
    fc.assert(
      fc.property(secretArb, encoding, surrounding, surrounding, fc.boolean(), (secret, chain, before, after, inField) => {
        fc.pre(encodable(secret) || !chain.some((name) => name.startsWith("uri") || name === "form"));
        const text = `${before}${encode(secret, chain)}${after}`;
        const line = inField ? jsonLogLine("info", "tool {name}: answered", [secret], { name: text }) : jsonLogLine("error", text, [secret]);
        expectNoForm(line, secret, line === "" ? {} : JSON.parse(line));
      }),
      { numRuns: 600 },
    );
  });

  it("leaves no form of a secret in a text line (property)", { timeout: 120_000 }, () => {
    fc.assert(
      fc.property(secretArb, encoding, surrounding, (secret, chain, before) => {
        fc.pre(encodable(secret) || !chain.some((name) => name.startsWith("uri") || name === "form"));
        const text = `${before}${encode(secret, chain)}`;
        const line = textLogLine("tool {name}: answered", [secret], { name: text, other: text });
        expectNoForm(line, secret, {});
        expect(line === "" || (line.endsWith("\n") && !line.slice(0, -1).includes("\n"))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("takes out overlapping secrets whole, the longest first", () => {
    const secrets = ["abc-123", "abc-123-xyz", "123-xyz-789"];
    const line = jsonLogLine("info", "keys abc-123-xyz-789 and abc-123 and 123-xyz-789", secrets);
    for (const secret of secrets) expect(line).not.toContain(secret);
    expect((JSON.parse(line) as { message: string }).message).toBe("keys [redacted]-789 and [redacted] and [redacted]");
  });

  it("redacts a secret that is part of the marker with another marker", () => {
    for (const secret of ["act", "redacted", "[red", "d]", "[redacted]"]) {
      const line = jsonLogLine("info", `the key is ${secret}!`, [secret], { key: secret });
      expect(line, secret).not.toContain(secret);
      expect(JSON.parse(line)).toMatchObject({ message: `the key is ${new Redactor([secret]).marker}!` });
    }
  });

  it("redacts the serialized line too: a secret JSON's own escaping writes is not let through", () => {
    // The two characters `\n`: not in the message (a newline is), but JSON writes the newline so.
    const line = jsonLogLine("info", "a\nb", ["\\n"]);
    expect(line).not.toContain("\\n");
    expect(JSON.parse(line)).toMatchObject({ level: "info" });
    // A secret only the structure holds (`"level"`): the line is withheld, never broken or leaking.
    const structural = jsonLogLine("info", "plain", ['"level"']);
    expect(structural).not.toContain('"level"');
  });
});

describe("a log line's structure", () => {
  it("keeps outside text in its field: a newline and a JSON object forge no line, no field", () => {
    const forged = 'evil\n{"level":"error","event":"forged"}\r\u2028';
    const line = jsonLogLine("info", "tool {name}: answered", [], { name: forged, level: "error", event: "forged" });
    expect(line.endsWith("\n")).toBe(true);
    expect(line.slice(0, -1)).not.toMatch(/[\n\r\u2028\u2029]/);
    const object = JSON.parse(line) as Record<string, unknown>;
    expect(object).toMatchObject({ level: "info", event: "tool", message: "tool {name}: answered", name: forged, level_: "error", event_: "forged" });
    // Ids come from the program's message only: a field saying "connection 9" sets none.
    expect(JSON.parse(jsonLogLine("info", "asked {what}", [], { what: "connection 9" }))).not.toHaveProperty("connection");
  });

  it("writes one text line an event: controls escaped, a field that is not one word quoted", () => {
    const [line, event] = logEvent("tool {name}: answered", { name: "a\nb", why: 'x y"z' });
    expect(line).toBe('tool a\\u000ab: answered why="x y\\"z"');
    expect(event).toEqual({ message: "tool {name}: answered", fields: { name: "a\nb", why: 'x y"z' } });
    expect(textLogLine("plain\nline")).toBe("plain\\u000aline\n");
  });
});
