// A secret in every form a log line can carry it. A value rarely reaches a line raw: it comes quoted
// in JSON (`\"`, `\\`, `\n`, `\u00e9`), in a URL (`%22`, `+`), as base64 (an `Authorization: Basic`
// header), or in one of those inside another. So each secret is expanded once into the literal texts
// those encoders write, and a line is searched for all of them at once (longest first).

/** How a JSON encoder may write a string's inside. */
interface JsonStyle {
  /** Every character above U+007E as `\uXXXX` (an ASCII-only encoder); else only what JSON must escape. */
  readonly ascii: boolean;
  readonly upperHex: boolean;
  /** `\n`, `\t`… where JSON has them; else `\u000a`. */
  readonly short: boolean;
  /** `/` as `\/` (PHP's json_encode, some Java encoders). */
  readonly slash: boolean;
}

const SHORT: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

const hex4 = (unit: number, upper: boolean) => {
  const text = unit.toString(16).padStart(4, "0");
  return upper ? text.toUpperCase() : text;
};

/** The inside of a JSON string holding `text`, as an encoder of `style` writes it. */
function jsonEscaped(text: string, style: JsonStyle): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    const unit = text.charCodeAt(i);
    if (char === '"' || char === "\\") out += SHORT[char];
    else if (char === "/" && style.slash) out += "\\/";
    else if (unit < 0x20 || unit === 0x7f) out += style.short && SHORT[char] ? SHORT[char] : `\\u${hex4(unit, style.upperHex)}`;
    // Lone surrogates are escaped by JSON.stringify (well-formed JSON.stringify) whatever the style.
    else if (unit > 0x7e && (style.ascii || (unit >= 0xd800 && unit <= 0xdfff && !pairedSurrogate(text, i)))) out += `\\u${hex4(unit, style.upperHex)}`;
    else out += char;
  }
  return out;
}

function pairedSurrogate(text: string, i: number): boolean {
  const unit = text.charCodeAt(i);
  if (unit >= 0xd800 && unit <= 0xdbff) {
    const next = text.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff;
  }
  const before = text.charCodeAt(i - 1);
  return before >= 0xd800 && before <= 0xdbff;
}

const lowerHex = (text: string) => text.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase());

/** `encode`, or the text unchanged where it cannot encode (a lone surrogate makes encodeURI throw). */
function orSame(encode: (text: string) => string): (text: string) => string {
  return (text) => {
    try {
      return encode(text);
    } catch {
      return text;
    }
  };
}

/** application/x-www-form-urlencoded, as URLSearchParams writes a value. */
const formEncoded = (text: string) => new URLSearchParams([["", text]]).toString().slice(1);

/** Every every-day encoder of text: JSON (several styles) and percent-encoding (several forms and cases). */
const TEXT_ENCODERS: readonly ((text: string) => string)[] = [
  (text) => JSON.stringify(text).slice(1, -1),
  ...[false, true].flatMap((upperHex) => [false, true].map((short) => (text: string) => jsonEscaped(text, { ascii: true, upperHex, short, slash: false }))),
  (text) => jsonEscaped(text, { ascii: false, upperHex: false, short: true, slash: true }),
  (text) => jsonEscaped(text, { ascii: true, upperHex: false, short: true, slash: true }),
  orSame(encodeURIComponent),
  orSame((text) => lowerHex(encodeURIComponent(text))),
  orSame(encodeURI),
  orSame((text) => lowerHex(encodeURI(text))),
  orSame(formEncoded),
  orSame((text) => lowerHex(formEncoded(text))),
  // RFC 3986 strict: encodeURIComponent leaves !'()* as they are.
  orSame((text) => encodeURIComponent(text).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`)),
];

/** A base64 text's characters that depend on the secret's bytes alone: at least this many to be searched for. */
const MIN_BASE64_CORE = 6;

/**
 * The base64 and base64url texts of `value`: its own (with and without `=` padding), and the part of
 * it that any longer base64 text embedding it carries, at each of the 3 alignments (the characters
 * whose 6 bits all come from the value, so they are the same whatever surrounds it).
 */
export function base64Forms(value: string): string[] {
  const bytes = Buffer.from(value, "utf8");
  if (bytes.length === 0) return [];
  const forms = new Set<string>();
  const padded = bytes.toString("base64");
  forms.add(padded).add(padded.replace(/=+$/, ""));
  for (let offset = 0; offset < 3; offset++) {
    const shifted = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64").replace(/=+$/, "");
    const core = shifted.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6));
    if (core.length >= MIN_BASE64_CORE) forms.add(core);
  }
  for (const form of [...forms]) forms.add(form.replace(/\+/g, "-").replace(/\//g, "_"));
  return [...forms];
}

/**
 * Every literal text `secret` can appear as in a line: raw; each text encoder's form and each
 * encoder's form of those (JSON inside JSON, JSON in a URL, a URL inside JSON…); base64 of the raw
 * value (base64Forms) and those in JSON or a URL.
 */
export function secretForms(secret: string): string[] {
  if (secret.length === 0) return [];
  const forms = new Set<string>([secret]);
  const once = TEXT_ENCODERS.map((encode) => encode(secret));
  for (const form of once) forms.add(form);
  for (const form of new Set(once)) for (const encode of TEXT_ENCODERS) forms.add(encode(form));
  for (const form of base64Forms(secret)) {
    forms.add(form);
    for (const encode of TEXT_ENCODERS) forms.add(encode(form));
  }
  forms.delete("");
  return [...forms];
}

/** A hex digit either case: an encoder may write `%2f` or `%2F`, `\u00e9` or `\u00E9`, and mix them in one text. */
const anyCase = (digit: string) => (/[a-f]/i.test(digit) ? `[${digit.toLowerCase()}${digit.toUpperCase()}]` : digit);

/**
 * A form as a regular expression: itself, but the hex digits of every `\uXXXX` (also percent-encoded,
 * `%5Cu…`) and `%XX` escape in it matched in either case.
 */
function pattern(form: string): string {
  return (form.match(/(?:\\|%5[cC])u[0-9a-fA-F]{4}|%[0-9a-fA-F]{2}|[\s\S]/g) ?? [])
    .map((token) => {
      if (token.length === 1) return token.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
      const hex = (digits: string) => [...digits].map(anyCase).join("");
      if (token.startsWith("%5") && token.length === 8) return `%5[cC]u${hex(token.slice(4))}`;
      if (token.startsWith("%")) return `%${hex(token.slice(1))}`;
      return `\\\\u${hex(token.slice(2))}`;
    })
    .join("");
}

const MARKERS = ["[redacted]", "[REDACTED]", "[hidden]", "***", "#", ""];
/** Passes over a text before its leftovers count as a secret that cannot be taken out. */
const MAX_PASSES = 4;

/** Replaces a set of secrets, in each of their forms, in any text. */
export class Redactor {
  /** What each secret's forms are replaced by: "[redacted]", unless that holds a form itself (the secret "act"). */
  readonly marker: string;
  private readonly all: RegExp | undefined;
  private readonly any: RegExp | undefined;

  constructor(secrets: readonly string[]) {
    const forms = new Set<string>();
    for (const secret of secrets) for (const form of secretForms(secret)) forms.add(form);
    // Longest first: an alternation takes its first alternative that matches, so a secret holding
    // another (or a double-escaped form holding the single one) is taken out whole.
    const ordered = [...new Set([...forms].sort((a, b) => b.length - a.length).map(pattern))];
    const source = ordered.join("|");
    this.all = ordered.length > 0 ? new RegExp(source, "g") : undefined;
    this.any = ordered.length > 0 ? new RegExp(source) : undefined;
    this.marker = MARKERS.find((marker) => !this.holds(marker)) ?? "";
  }

  /** Whether `text` holds any form of any secret. */
  holds(text: string): boolean {
    return this.any?.test(text) ?? false;
  }

  /**
   * `text` with every form of every secret replaced by the marker; again while a replacement made a
   * new one with its neighbours (secrets "ab" and "]a": "[redacted]ab"), and only the marker when
   * that does not end.
   */
  redact(text: string): string {
    if (!this.all || !this.holds(text)) return text;
    let out = text;
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      out = out.replace(this.all, this.marker);
      if (!this.holds(out)) return out;
    }
    return this.marker;
  }
}

const redactors = new Map<string, Redactor>();

/** The Redactor of `secrets`, made once per set (a log asks at every line). */
export function redactorOf(secrets: readonly string[]): Redactor {
  const key = JSON.stringify(secrets);
  let redactor = redactors.get(key);
  if (!redactor) {
    if (redactors.size > 16) redactors.clear();
    redactor = new Redactor(secrets);
    redactors.set(key, redactor);
  }
  return redactor;
}
