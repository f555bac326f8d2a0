// The log of `diverge-proxy` and `diverge connect`: one event a line, as text or as one JSON object
// (`--log-format json`); outside text only in fields (never in the structure of a line), every form
// of every secret redacted (redact.ts). Apart from ops.ts so a command logs without loading prom-client.
import { redactorOf, type Redactor } from "./redact.js";

export { base64Forms, Redactor, redactorOf, secretForms } from "./redact.js";

export type LogLevel = "info" | "error";

/**
 * What a line says beyond its message: names, reasons, paths, error texts — anything that came from
 * outside. Each is a JSON value of the line's object, never part of its message or structure. The
 * message names a field as `{name}` where the text format writes its value.
 */
export type LogFields = { readonly [name: string]: unknown };

/** One event: a message fixed by the program (its words make the JSON `event`) and the fields it names. */
export interface LogEvent {
  readonly message: string;
  readonly fields: LogFields;
}

/**
 * Where a part writes its lines. `line` is the event as one line of text (its control characters
 * escaped: logEvent), so `(line) => lines.push(line)` is a whole log; `event`, when the line carries
 * outside text, is the same as a fixed message and its fields, for a log that keeps them apart (JSON).
 */
export type Say = (line: string, event?: LogEvent) => void;

/**
 * The arguments of a `Say` for `message` with `fields`: `say(...logEvent("tool {name}: answered", { name }))`.
 * The line is the text format's (textLogLine, without secrets); the event keeps the fields apart.
 */
export function logEvent(message: string, fields: LogFields = {}): [string, LogEvent] {
  return [renderText(message, fields, redactorOf([])), { message, fields }];
}

/** Where a run's lines go: `info` for progress lines (those --quiet hides), `error` for the others. */
export interface OpsLog {
  info: Say;
  error: Say;
}

/** `(connection|channel|scope|session|mount|ask) <n>` in a line, as ids of the JSON object. */
const ID = /\b(connection|channel|scope|session|ask|mount)\s+#?(\d+)\b/g;

const STOP_WORDS = new Set(["at", "on", "to", "the", "a", "an", "of", "and", "in", "for", "with", "from", "by"]);

/** The same words for the same happening: the line's head (before its first `: `), without numbers, slashes or quoted parts. */
export function eventOf(line: string): string {
  const head = line.split(/:\s/)[0] ?? line;
  const words = head
    .replace(/\{.*\}|\[.*\]|"[^"]*"|'[^']*'|\([^)]*\)/g, " ")
    .replace(/[a-z]+:\/\/\S+/gi, " ")
    .split(/\s+/)
    .filter((word) => word.length > 0 && !/\d/.test(word))
    .map((word) => word.toLowerCase().replace(/[^a-z0-9_-]+/g, ""))
    .filter((word) => word.length > 0 && !STOP_WORDS.has(word));
  return words.slice(0, 5).join(".") || "log";
}

/** `value` with every string in it (and every key of an object in it) redacted; what JSON cannot hold as text. */
function redactValue(value: unknown, redactor: Redactor, depth = 0): unknown {
  if (typeof value === "string") return redactor.redact(value);
  if (value === null || typeof value === "number" || typeof value === "boolean" || value === undefined) return value;
  if (typeof value === "bigint") return redactor.redact(value.toString());
  if (value instanceof Error) return redactor.redact(value.message);
  if (typeof value === "function" || typeof value === "symbol") return undefined;
  if (depth > 8) return "[too deep]";
  if (Array.isArray(value)) return value.map((item) => redactValue(item, redactor, depth + 1));
  if (typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) out[redactor.redact(key)] = redactValue(item, redactor, depth + 1);
    return out;
  }
  return redactor.redact(String(value));
}

/** Every character that is not printable ASCII as `\uXXXX`: a line that no terminal, viewer or splitter breaks (U+2028, NEL, bidi controls). */
const asciiOnly = (json: string) => json.replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);

/**
 * One JSON object for a line: `time` (ISO 8601), `level`, `event` (eventOf), the ids named in the
 * message, the message, then `fields`. Every form of every value in `secrets` (redact.ts) is replaced
 * in the message and the fields, and again in the serialized line (where JSON's escaping could make
 * one); a line still holding one after that is withheld: only its time, level and event are written.
 */
export function jsonLogLine(level: LogLevel, message: string, secrets: readonly string[] = [], fields: LogFields = {}): string {
  const redactor = redactorOf(secrets);
  const said = redactor.redact(message);
  const ids: Record<string, number> = {};
  for (const match of said.matchAll(ID)) ids[match[1]!] = Number(match[2]);
  const time = new Date().toISOString();
  const object: Record<string, unknown> = { time, level, event: eventOf(said), ...ids, message: said };
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    let key = redactor.redact(name);
    while (key in object) key = `${key}_`;
    object[key] = redactValue(value, redactor);
  }
  const line = asciiOnly(JSON.stringify(object));
  if (!redactor.holds(line)) return `${line}\n`;
  const again = redactor.redact(line);
  if (!redactor.holds(again) && parsesAsObject(again)) return `${again}\n`;
  const withheld = asciiOnly(JSON.stringify({ time, level, event: "log.withheld", message: "a line held a secret in a form that could not be taken out; withheld" }));
  return redactor.holds(withheld) ? "" : `${withheld}\n`;
}

function parsesAsObject(line: string): boolean {
  try {
    const parsed: unknown = JSON.parse(line);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed);
  } catch {
    return false;
  }
}

/** Control characters (C0, DEL, C1, the line and paragraph separators, bidi controls) as `\uXXXX`: one event stays one line. */
export function escapeControls(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A field's value in the text format: a plain word as it is, anything else as JSON (quoted, escaped). */
function textValue(value: unknown): string {
  if (typeof value === "string") return /^[^\s"'\\=\u0000-\u001f\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]+$/.test(value) ? value : escapeControls(JSON.stringify(value));
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return escapeControls(JSON.stringify(value) ?? String(value));
}

/** `{name}` in a message: where the text format writes the field `name`. */
const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The text of an event: `{name}` replaced by the value (controls escaped), then ` name=value` for the fields not named. */
function renderText(message: string, fields: LogFields, redactor: Redactor): string {
  const named = new Set<string>();
  let line = escapeControls(redactor.redact(message)).replace(PLACEHOLDER, (whole, name: string) => {
    if (!Object.hasOwn(fields, name) || fields[name] === undefined) return whole;
    named.add(name);
    // In the message a value needs no quotes (it cannot pose as a `name=value`), only its controls escaped.
    const value = redactValue(fields[name], redactor);
    return typeof value === "string" ? escapeControls(value) : textValue(value);
  });
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && !named.has(name)) line += ` ${escapeControls(redactor.redact(name)).replace(/[\s=]/g, "_")}=${textValue(redactValue(value, redactor))}`;
  }
  return line;
}

/**
 * One line of the text format: the message with each `{name}` replaced by the field's value, control
 * characters escaped, then ` name=value` for each field the message does not name (textValue: a
 * plain word as it is, anything else quoted and escaped); secrets redacted as in jsonLogLine, and a
 * line still holding one withheld (empty).
 */
export function textLogLine(message: string, secrets: readonly string[] = [], fields: LogFields = {}): string {
  const redactor = redactorOf(secrets);
  const out = redactor.redact(renderText(message, fields, redactor));
  return redactor.holds(out) ? "" : `${out}\n`;
}

export interface LogFormatOptions {
  /** "text" (the default: lines as they are) or "json". */
  readonly format: "text" | "json";
  /** Values never to be written (the secrets a run holds); read at every line. */
  readonly secrets?: () => readonly string[];
}

/**
 * The run's log. With "json", every line written to stderr — by this log or by anything else of the
 * process — becomes one JSON object (`error` level unless written with `info`), so nothing leaves as
 * plain text; secrets are redacted from both. One call of the log is one line whatever its message
 * and fields hold; what else writes to stderr is split at its newlines.
 */
export function useLogFormat(options: LogFormatOptions): OpsLog {
  const write = process.stderr.write.bind(process.stderr) as (text: string) => boolean;
  const secrets = options.secrets ?? (() => []);
  if (options.format === "text") {
    const say: Say = (line, event) => void write(event ? textLogLine(event.message, secrets(), event.fields) : textLogLine(line, secrets()));
    return { info: say, error: say };
  }
  let pending = "";
  const emit = (level: LogLevel, line: string, event?: LogEvent) => void write(event ? jsonLogLine(level, event.message, secrets(), event.fields) : jsonLogLine(level, line, secrets()));
  // Whatever else writes to stderr (an error message, a dependency's warning) is turned into objects too.
  (process.stderr as { write: unknown }).write = (chunk: string | Uint8Array, encoding?: unknown, callback?: unknown) => {
    pending += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    const end = pending.lastIndexOf("\n");
    if (end >= 0) {
      for (const line of pending.slice(0, end).split("\n")) if (line.trim().length > 0) emit("error", line);
      pending = pending.slice(end + 1);
    }
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") process.nextTick(done as () => void);
    return true;
  };
  process.once("exit", () => pending.trim() && emit("error", pending));
  return { info: (line, event) => emit("info", line, event), error: (line, event) => emit("error", line, event) };
}
