// The intermediate representation: the spec with every reference resolved and every rule checked.
// Emitters read only this, never the YAML.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { ErrorObject } from "ajv";
import { placeOf, SpecError, SpecErrors, type LoadedSpec, type PathKey, type SourceFile } from "./load.js";
import { buildPostcardShape, buildPostcardTypes, checkPostcardErrorType, DISCRIMINANT, type IrPostcardShape, type IrPostcardType } from "./postcard-ir.js";

export { DISCRIMINANT, specName } from "./postcard-ir.js";
import { buildJsonTypes, type IrJsonType } from "./json-ir.js";
export type { IrJsonMember, IrJsonRef, IrJsonShape, IrJsonType, IrJsonUnionVariant } from "./json-ir.js";

export type IntType = "u8" | "u16" | "u32" | "u64";
export const INT_SIZE: Record<IntType, number> = { u8: 1, u16: 2, u32: 4, u64: 8 };

export interface IrIntField {
  readonly name: string;
  readonly type: IntType;
  readonly doc: string;
}

export type IrJsonSchema =
  | { readonly kind: "mcp"; readonly name: string; readonly nullable: boolean }
  | { readonly kind: "mapOfString" }
  | { readonly kind: "any" }
  | { readonly kind: "object" }
  /** A named JSON type of the revision (`jsonTypes:`). */
  | { readonly kind: "json"; readonly name: string };

export interface IrField {
  readonly name: string;
  readonly type: IntType | "bytes" | "utf8" | "json" | "postcard" | "list";
  /** For bytes, utf8 and json: where the length comes from; a list's count is a u32 before it. */
  readonly length: "rest" | "u16" | "fixed" | "count";
  /** For an integer: the largest value allowed; a larger one raises `invalid` with the value. */
  readonly max?: number;
  /** For a list: the fields of each entry (fixed integers, u16-prefixed text or bytes), read in order. */
  readonly entry?: readonly IrField[];
  /** For `max`: the error variant's field that carries the value read. */
  readonly invalidField?: string;
  /** The error variant raised when the field's content is not what it should be. */
  readonly invalid?: string;
  readonly schema?: IrJsonSchema;
  /** For a postcard field: the postcard frame it carries. */
  readonly postcard?: string;
  readonly doc: string;
}

export interface IrBody {
  readonly fields: readonly IrField[];
  /** The error type the body's own failures belong to. */
  readonly errorTypeId: string;
  readonly truncated?: string;
  readonly exact?: string;
  readonly trailing: "ignore" | "none";
  /** Set when the body is another frame's, flattened: its failures are wrapped in `invalid`. */
  readonly nested?: { readonly frameId: string; readonly invalid: string };
}

export interface IrVariant {
  readonly tag: number;
  readonly name: string;
  readonly doc: string;
  readonly body: IrBody;
  readonly answer?: string;
  /** Where the variant's own docs page sits under its frame's folder, when the spec names it. */
  readonly path?: string;
}

export interface IrSwitch {
  readonly on: string;
  readonly property: string;
  readonly unknown: string;
  readonly variants: readonly IrVariant[];
}

export interface IrExample {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly value?: Record<string, unknown>;
  readonly roundTrip: boolean;
  readonly error?: { readonly variant: string; readonly message?: string; readonly messagePrefix?: string };
}

export interface IrFrame {
  readonly id: string;
  readonly name: string;
  readonly title: string;
  readonly doc: string;
  readonly errorTypeId: string;
  readonly malformed?: string;
  readonly header?: { readonly fields: readonly IrIntField[]; readonly truncated: string };
  readonly switch?: IrSwitch;
  readonly body?: IrBody;
  /** Set when the whole payload is one postcard value of this shape (the frame's name is its type). */
  readonly postcard?: IrPostcardShape;
  readonly rules: readonly string[];
  readonly examples: readonly IrExample[];
  /** For a frame declared once for both directions: which direction this one is. */
  readonly direction?: "client" | "server";
  readonly family?: { readonly id: string; readonly name: string; readonly title: string; readonly doc: string };
  /** Where the frame's tag table differs from a published one the project does not follow tag for tag. */
  readonly published?: IrPublished;
  readonly file: string;
}

export interface IrPublished {
  /** Which published table, in words (e.g. "the published A4d table"). */
  readonly source: string;
  readonly doc: string;
  /** Every tag whose meaning differs: what the published table gives it (or that it has none). */
  readonly tags: readonly { readonly tag: number; readonly published: string; readonly doc: string }[];
}

export interface IrErrorField {
  readonly name: string;
  readonly type: "u8" | "u32" | "usize" | "reason" | "error";
  readonly errorTypeId?: string;
  readonly redacted: boolean;
  readonly doc: string;
}

export interface IrErrorVariant {
  readonly name: string;
  readonly doc: string;
  readonly message: string;
  readonly fields: readonly IrErrorField[];
}

export interface IrErrorType {
  readonly id: string;
  readonly name: string;
  readonly doc: string;
  readonly variants: readonly IrErrorVariant[];
  /** The frames whose `error` this is. With exactly one, the error lives in that frame's module. */
  readonly usedBy: readonly string[];
}

export interface IrMcpType {
  readonly name: string;
  readonly schema: string;
  readonly member?: string;
  readonly doc: string;
}

/**
 * How the messages answering an exchange or a channel come:
 * - `one`: exactly one message, then a clean close (or finish);
 * - `oneWhenHeld`: exactly one message, sent when a condition holds however long that takes;
 * - `perNotification` / `perItem`: a stream of messages, one per notification or item, where the
 *   `last` variant, when sent, is the last message;
 * - `raw`: raw bytes both ways, no frame.
 */
export type AnswerPattern = "one" | "oneWhenHeld" | "perNotification" | "perItem" | "raw";
export const ANSWER_PATTERNS: readonly AnswerPattern[] = ["one", "oneWhenHeld", "perNotification", "perItem", "raw"];

export interface IrAnswer {
  /** The answer frame, when it is declared; undefined for raw bytes and for a pending frame. */
  readonly frameId: string | undefined;
  /** A frame the spec names that a later change declares; nothing typed is generated for it yet. */
  readonly pendingFrameId?: string;
  readonly messages: AnswerPattern;
  /** For a stream: the variant that ends it when sent. */
  readonly last?: string;
}

export interface IrExchange {
  readonly id: string;
  readonly kind: number;
  readonly ask: string;
  readonly askFrameId: string;
  readonly variantName: string;
  readonly payload: string;
  readonly path: string;
  /** The answer frame; undefined when the answer is raw bytes or its frame is still pending. */
  readonly answerFrameId: string | undefined;
  readonly pendingAnswerFrameId?: string;
  readonly messages: AnswerPattern;
  readonly last?: string;
  readonly unanswered: "askedAgain" | "neverAskedAgain";
  readonly notServed: "askedAgain" | "neverAskedAgain";
  /**
   * A stream the proxy keeps for its life: first asked after its first exchange of one of `afterIds`,
   * asked again when its path ends (`ended`). Undefined for an exchange asked per request.
   */
  readonly standing?: { readonly afterIds: readonly string[]; readonly ended: "nextConnection" };
  /** The begin-scope channel that carries the same exchange, when there is one (the first table's; every carrier has the same opener, tag and variant). */
  readonly channel?: { readonly tableId: string; readonly opener: "provider" | "proxy"; readonly tag: number; readonly variantName: string };
  /** Every begin-scope channel that carries the exchange, one per channel table, in table order. */
  readonly channels?: readonly { readonly tableId: string; readonly opener: "provider" | "proxy"; readonly tag: number; readonly variantName: string }[];
}

export interface IrChannel {
  readonly tag: number;
  readonly variantName: string;
  /** What a finish with no response before it means. */
  readonly bareFinish: "notServed" | "declined" | "unknownConnection";
  /** The exchange of `/requests` this channel carries on the begin scope. */
  readonly exchangeId?: string;
  readonly answer: IrAnswer;
  readonly doc?: string;
}

export interface IrOpenedPath {
  readonly id: string;
  readonly path: string;
  readonly title: string;
  readonly doc: string;
  readonly request: { readonly frameId: string | undefined; readonly pendingFrameId?: string; readonly messages: "none" | "one" | "oneThenPieces" };
  readonly answer: IrAnswer;
  readonly closedBy: "provider" | "proxy";
}

export interface IrOpenedPathGroup {
  readonly id: string;
  readonly title: string;
  readonly summary: string;
  readonly pathIds: readonly string[];
  readonly rules: readonly { readonly id: string; readonly title: string; readonly text: string }[];
}

export interface IrExchangeGroup {
  readonly id: string;
  readonly title: string;
  readonly summary: string;
  readonly exchangeIds: readonly string[];
  /** `exchangeIds`, when given, names the exchanges of the group a rule concerns; otherwise all of them. */
  readonly rules: readonly { readonly id: string; readonly title: string; readonly text: string; readonly exchangeIds?: readonly string[] }[];
}

export interface IrChannelTable {
  readonly id: string;
  readonly title: string;
  readonly doc: string;
  /** The provider's typed interface of the channels it opens on the table; `bind<name>` binds it. */
  readonly providerAsks: string;
  readonly tables: readonly { readonly opener: "provider" | "proxy"; readonly frameId: string; readonly channels: readonly IrChannel[] }[];
}

export interface IrRevision {
  readonly revision: string;
  readonly title: string;
  readonly mcpRevision: string;
  readonly doc: string;
  readonly ports: readonly { readonly name: string; readonly number: number; readonly doc: string }[];
  readonly mcpTypes: readonly IrMcpType[];
  readonly frames: readonly IrFrame[];
  readonly errorTypes: readonly IrErrorType[];
  readonly channelTables: readonly IrChannelTable[];
  readonly exchanges: readonly IrExchange[];
  readonly exchangeGroups: readonly IrExchangeGroup[];
  readonly openedPaths: readonly IrOpenedPath[];
  readonly openedPathGroups: readonly IrOpenedPathGroup[];
  readonly postcardTypes: readonly IrPostcardType[];
  /** Named JSON types json fields carry (`schema: { json: … }`). */
  readonly jsonTypes: readonly IrJsonType[];
  /** sha256 over every spec file of the revision, in name order; stamped into generated headers. */
  readonly sourceHash: string;
}

/** An IR's frames, error types and postcard types by id, built once per revision: emitters look ids up per frame. */
interface IrIndex {
  readonly frames: ReadonlyMap<string, IrFrame>;
  readonly errorTypes: ReadonlyMap<string, IrErrorType>;
  readonly postcardTypes: ReadonlyMap<string, IrPostcardType>;
  /** Error type id → the error types with a variant carrying it, in declaration order. */
  readonly carriers: ReadonlyMap<string, readonly IrErrorType[]>;
}
const indexes = new WeakMap<IrRevision, IrIndex>();
function indexOf(ir: IrRevision): IrIndex {
  let index = indexes.get(ir);
  if (!index) {
    const carriers = new Map<string, IrErrorType[]>();
    for (const e of ir.errorTypes) {
      const carried = new Set<string>();
      for (const v of e.variants) for (const f of v.fields) if (f.errorTypeId !== undefined) carried.add(f.errorTypeId);
      for (const id of carried) {
        let list = carriers.get(id);
        if (!list) carriers.set(id, (list = []));
        list.push(e);
      }
    }
    index = {
      frames: new Map(ir.frames.map((f) => [f.id, f])),
      errorTypes: new Map(ir.errorTypes.map((e) => [e.id, e])),
      postcardTypes: new Map(ir.postcardTypes.map((t) => [t.id, t])),
      carriers,
    };
    indexes.set(ir, index);
  }
  return index;
}
/** The frame `id` of `ir` (which the IR has checked exists). */
export const frameOf = (ir: IrRevision, id: string): IrFrame | undefined => indexOf(ir).frames.get(id);
/** The error type `id` of `ir`. */
export const errorTypeOf = (ir: IrRevision, id: string): IrErrorType | undefined => indexOf(ir).errorTypes.get(id);
/** The named postcard type `id` of `ir`. */
export const postcardTypeOf = (ir: IrRevision, id: string): IrPostcardType | undefined => indexOf(ir).postcardTypes.get(id);
/** The error types of `ir` with a variant that carries error type `id`, in declaration order. */
export const carriersOf = (ir: IrRevision, id: string): readonly IrErrorType[] => indexOf(ir).carriers.get(id) ?? [];

// ---------------------------------------------------------------------------------------------

type Raw = Record<string, any>;

interface Located<T> {
  readonly value: T;
  readonly file: SourceFile;
  readonly path: readonly PathKey[];
}

const require = createRequire(import.meta.url);

/** Validates the raw YAML against spec/spec.schema.json, then resolves and checks it into the IR. */
export function buildIr(loaded: LoadedSpec, schemaPath: string): IrRevision {
  const errors: SpecError[] = [];
  const fail = (file: SourceFile, path: readonly PathKey[], sentence: string) =>
    errors.push(new SpecError(placeOf(file, path), sentence));

  const Ajv = require("ajv") as typeof import("ajv").default;
  const ajv = new Ajv({ allErrors: true, strict: false });
  const validate = ajv.compile(JSON.parse(readFileSync(schemaPath, "utf8")));
  for (const file of loaded.files) {
    const data = file.doc.toJS() ?? {};
    if (!validate(data)) {
      for (const problem of pickSchemaErrors(validate.errors ?? [])) {
        const path = problem.instancePath.split("/").slice(1).map(unescapePointer);
        fail(file, path, describeSchemaError(problem, path));
      }
    }
  }
  if (errors.length > 0) throw new SpecErrors(errors);

  // Gather every top-level list across files, remembering where each item came from. Each file's
  // YAML is turned into plain values once (every key is gathered once).
  const plain = new Map(loaded.files.map((file) => [file, file.doc.toJS() as Raw | null | undefined]));
  const gather = <T = Raw>(key: string): Located<T>[] =>
    loaded.files.flatMap((file) => {
      const list = (plain.get(file)?.[key] ?? []) as T[];
      return list.map((value, index) => ({ value, file, path: [key, index] }));
    });
  const single = (key: string): Located<any> | undefined => {
    for (const file of loaded.files) {
      const value = plain.get(file)?.[key];
      if (value !== undefined) return { value, file, path: [key] };
    }
    return undefined;
  };

  const revision = single("revision");
  if (!revision) throw new SpecErrors([new SpecError({ file: loaded.dir, line: 1, column: 1 }, "no file of the revision says which revision it is (`revision:`).")]);
  const mcpTypesRaw = single("mcpTypes");
  const mcpTypes: IrMcpType[] = Object.entries((mcpTypesRaw?.value ?? {}) as Record<string, Raw>).map(([name, t]) => ({
    name,
    schema: t.schema,
    member: t.member,
    doc: t.doc,
  }));
  const mcpNames = new Set(mcpTypes.map((t) => t.name));
  const jsonRaw = gather("jsonTypes");
  const jsonNames = new Set(jsonRaw.map((e) => e.value.name as string));

  // Error types first: frames point at them.
  const errorRaw = gather("errorTypes");
  const errorById = new Map<string, Located<Raw>>();
  for (const entry of errorRaw) {
    if (errorById.has(entry.value.id)) fail(entry.file, [...entry.path, "id"], `error type id \`${entry.value.id}\` is declared twice.`);
    errorById.set(entry.value.id, entry);
  }

  // Frames, with frames declared for both directions expanded into one per direction.
  const frameRaw = gather("frames");
  const expanded: Located<Raw>[] = [];
  for (const entry of frameRaw) {
    const f = entry.value;
    if (!f.directions) {
      expanded.push(entry);
      continue;
    }
    for (const [direction, d] of Object.entries(f.directions as Record<string, Raw>)) {
      const variants = (f.switch?.variants ?? []).filter((v: Raw) => (v.directions ?? ["client", "server"]).includes(direction));
      expanded.push({
        file: entry.file,
        path: entry.path,
        value: {
          ...f,
          id: d.id,
          name: d.name,
          doc: d.doc,
          direction,
          family: { id: f.id, name: f.name, title: f.title, doc: f.doc },
          switch: f.switch ? { ...f.switch, variants } : undefined,
          examples: (f.examples ?? []).filter((e: Raw) => e.direction === direction),
          directions: undefined,
          __variantPaths: (f.switch?.variants ?? []).map((v: Raw, i: number) => ({ v, i })).filter(({ v }: { v: Raw }) => (v.directions ?? ["client", "server"]).includes(direction)).map(({ i }: { i: number }) => i),
        },
      });
    }
    for (const [i, e] of (f.examples ?? []).entries()) {
      if (!e.direction || !(e.direction in f.directions)) fail(entry.file, [...entry.path, "examples", i], `example "${e.name}" of a frame with directions must say which direction it is (\`direction: client\` or \`direction: server\`).`);
    }
  }
  const frameById = new Map<string, Located<Raw>>();
  const frameNames = new Map<string, string>();
  for (const entry of expanded) {
    const { id, name } = entry.value;
    if (frameById.has(id)) fail(entry.file, [...entry.path, "id"], `frame id \`${id}\` is declared twice.`);
    frameById.set(id, entry);
    if (frameNames.has(name)) fail(entry.file, [...entry.path, "name"], `frame name \`${name}\` is used by both \`${frameNames.get(name)}\` and \`${id}\`.`);
    frameNames.set(name, id);
  }
  const errorNames = new Map<string, string>();
  for (const entry of errorRaw) {
    const { id, name } = entry.value;
    if (errorNames.has(name) || frameNames.has(name)) fail(entry.file, [...entry.path, "name"], `error type name \`${name}\` is already the name of \`${errorNames.get(name) ?? frameNames.get(name)}\`.`);
    errorNames.set(name, id);
  }
  const jsonTypes = buildJsonTypes(
    jsonRaw,
    new Map<string, string>([
      ...[...frameNames].map(([n, id]) => [n, `frame \`${id}\``] as [string, string]),
      ...[...errorNames].map(([n, id]) => [n, `error type \`${id}\``] as [string, string]),
      ...mcpTypes.map((m) => [m.name, `MCP type ${m.name}`] as [string, string]),
    ]),
    fail,
  );

  const errorVariant = (errorTypeId: string, variant: string) =>
    (errorById.get(errorTypeId)?.value.variants as Raw[] | undefined)?.find((v) => v.name === variant);

  const requireVariant = (file: SourceFile, path: readonly PathKey[], errorTypeId: string, variant: string, role: string, fields: readonly string[] = []) => {
    const v = errorVariant(errorTypeId, variant);
    if (!v) {
      fail(file, path, `${role} names error variant \`${variant}\`, which error type \`${errorTypeId}\` does not have.`);
      return;
    }
    const have = ((v.fields ?? []) as Raw[]).map((f) => f.name);
    for (const field of fields) {
      if (!have.includes(field)) fail(file, path, `${role} raises \`${variant}\` with \`${field}\`, but that variant of \`${errorTypeId}\` has no field \`${field}\`.`);
    }
  };

  const buildBody = (raw: Raw, errorTypeId: string, file: SourceFile, path: readonly PathKey[], seen: readonly string[]): IrBody => {
    if (raw.frame) {
      const inner = frameById.get(raw.frame);
      if (!inner) {
        fail(file, [...path, "frame"], `body refers to frame \`${raw.frame}\`, which no file of the revision declares.`);
        return { fields: [], errorTypeId, trailing: "ignore" };
      }
      if (!inner.value.body) {
        fail(file, [...path, "frame"], `body refers to frame \`${raw.frame}\`, which is a tagged union; only a frame with a plain body can be flattened into a variant.`);
        return { fields: [], errorTypeId, trailing: "ignore" };
      }
      if (seen.includes(raw.frame)) {
        fail(file, [...path, "frame"], `frame \`${raw.frame}\` contains itself.`);
        return { fields: [], errorTypeId, trailing: "ignore" };
      }
      requireVariant(file, [...path, "invalid"], errorTypeId, raw.invalid, "the body's `invalid`");
      const wrap = errorVariant(errorTypeId, raw.invalid);
      const sourceField = ((wrap?.fields ?? []) as Raw[]).find((f) => f.type === "error");
      if (wrap && (!sourceField || sourceField.error !== inner.value.error)) {
        fail(file, [...path, "invalid"], `error variant \`${raw.invalid}\` must carry a field of type \`error\` with \`error: ${inner.value.error}\` to wrap what frame \`${raw.frame}\` can fail with.`);
      }
      const innerBody = buildBody(inner.value.body, inner.value.error, inner.file, [...inner.path, "body"], [...seen, raw.frame]);
      return { ...innerBody, nested: { frameId: raw.frame, invalid: raw.invalid } };
    }
    const fields: IrField[] = [];
    const rawFields = (raw.fields ?? []) as Raw[];
    const names = new Set<string>();
    let needsTruncated = false;
    rawFields.forEach((f, i) => {
      const at = [...path, "fields", i];
      if (names.has(f.name)) fail(file, [...at, "name"], `field \`${f.name}\` appears twice in one body.`);
      if (f.name === "bytes") fail(file, [...at, "name"], "field name `bytes` is the generated decoder's input; choose another.");
      names.add(f.name);
      const isInt = f.type === "u8" || f.type === "u16" || f.type === "u32" || f.type === "u64";
      let entry: IrField[] | undefined;
      let invalidField: string | undefined;
      if (f.type === "list") {
        if (i !== rawFields.length - 1) fail(file, at, `list \`${f.name}\` must be the body's last field.`);
        entry = ((f.entry?.fields ?? []) as Raw[]).map((e) => {
          const int = e.type === "u8" || e.type === "u16" || e.type === "u32" || e.type === "u64";
          if (!int && !((e.type === "utf8" || e.type === "bytes") && e.length === "u16")) fail(file, [...at, "entry"], `entry field \`${e.name}\` of list \`${f.name}\` must be a fixed integer or u16-prefixed text or bytes.`);
          if (e.type === "utf8" && !e.invalid) fail(file, [...at, "entry"], `entry field \`${e.name}\` must name the error variant raised when its text is not UTF-8 (\`invalid:\`).`);
          if (e.invalid && e.max === undefined && e.type !== "utf8") fail(file, [...at, "entry"], `entry field \`${e.name}\` names \`invalid\` but nothing can be invalid about it.`);
          if (e.invalid) requireVariant(file, [...at, "entry"], errorTypeId, e.invalid, `entry field \`${e.name}\``);
          const carried = e.max !== undefined ? ((errorVariant(errorTypeId, e.invalid)?.fields ?? []) as Raw[]) : [];
          if (e.max !== undefined && carried.length !== 1) fail(file, [...at, "entry"], `entry field \`${e.name}\` has a \`max\`, so \`${e.invalid}\` must carry exactly one field: the value read.`);
          return { name: e.name, type: e.type, length: int ? "fixed" : "u16", invalid: e.invalid, max: e.max, invalidField: carried[0]?.name, doc: e.doc } as IrField;
        });
      }
      if (f.max !== undefined) {
        if (!isInt) fail(file, [...at, "max"], `only an integer field takes a \`max\`; \`${f.name}\` is ${f.type}.`);
        if (!f.invalid) fail(file, at, `field \`${f.name}\` has a \`max\`, so it must name the error variant raised above it (\`invalid:\`).`);
        const carried = (errorVariant(errorTypeId, f.invalid)?.fields ?? []) as Raw[];
        if (carried.length !== 1) fail(file, [...at, "invalid"], `\`${f.invalid}\` must carry exactly one field, the value read, to be raised by \`max\`.`);
        invalidField = carried[0]?.name;
      }
      let length: IrField["length"] = "fixed";
      if (f.type === "list") length = "count";
      else if (!isInt) {
        if (f.type === "json") length = f.length ?? "rest";
        else if (!f.length && f.type !== "postcard") fail(file, at, `field \`${f.name}\` of type ${f.type} must say where its length comes from (\`length: rest\` or \`length: u16\`).`);
        else length = f.length;
        if (f.type === "json" && length !== "rest") fail(file, [...at, "length"], `json field \`${f.name}\` must run to the end of the payload (\`length: rest\`).`);
      } else if (f.length) fail(file, [...at, "length"], `integer field \`${f.name}\` has a fixed width and takes no \`length\`.`);
      if (f.type === "postcard") {
        length = "rest";
        const target = frameById.get(f.postcard);
        if (!target || !target.value.postcard) fail(file, [...at, "postcard"], `postcard field \`${f.name}\` must name a frame whose payload is one postcard value (\`postcard:\`); \`${f.postcard}\` is not one.`);
        if (!f.invalid) fail(file, at, `postcard field \`${f.name}\` must name the error variant raised when its content is bad (\`invalid:\`).`);
        else if (target) {
          const wrap = errorVariant(errorTypeId, f.invalid);
          const source = ((wrap?.fields ?? []) as Raw[]).find((x) => x.type === "error");
          if (!source || source.error !== target.value.error) fail(file, [...at, "invalid"], `error variant \`${f.invalid}\` must carry a field of type \`error\` with \`error: ${target.value.error}\` to wrap what frame \`${f.postcard}\` can fail with.`);
        }
      } else if (f.postcard) fail(file, [...at, "postcard"], `only a postcard field names a \`postcard\` frame; \`${f.name}\` is ${f.type}.`);
      if (length === "rest" && i !== rawFields.length - 1) fail(file, at, `field \`${f.name}\` runs to the end of the payload, so it must be the body's last field.`);
      if (length === "fixed" || length === "u16" || length === "count") needsTruncated = true;
      if ((f.type === "utf8" || f.type === "json") && !f.invalid) fail(file, at, `${f.type} field \`${f.name}\` must name the error variant raised when its content is bad (\`invalid:\`).`);
      if (f.invalid && f.type !== "postcard" && f.type !== "list") requireVariant(file, [...at, "invalid"], errorTypeId, f.invalid, `field \`${f.name}\``, f.type === "json" ? ["reason"] : []);
      if (f.type === "json" && !f.schema) fail(file, at, `json field \`${f.name}\` must say what JSON it carries (\`schema:\`).`);
      if (f.type !== "json" && f.schema) fail(file, [...at, "schema"], `only a json field takes a \`schema\`; \`${f.name}\` is ${f.type}.`);
      let schema: IrJsonSchema | undefined;
      if (f.schema) {
        const s = f.schema as Raw;
        const forms = ["mcp", "mapOf", "any", "object", "json"].filter((k) => k in s);
        if (forms.length !== 1) fail(file, [...at, "schema"], `a json schema names exactly one of \`mcp\`, \`mapOf\`, \`any\`, \`object\`, \`json\`; this one names ${forms.length}.`);
        if (s.nullable !== undefined && !s.mcp) fail(file, [...at, "schema", "nullable"], "only an MCP schema takes `nullable`; a JSON type says null where it allows it.");
        if (s.mcp) {
          if (!mcpNames.has(s.mcp)) fail(file, [...at, "schema", "mcp"], `MCP type \`${s.mcp}\` is not declared under \`mcpTypes\` of the revision.`);
          schema = { kind: "mcp", name: s.mcp, nullable: s.nullable === true };
        } else if (s.json) {
          if (!jsonNames.has(s.json)) fail(file, [...at, "schema", "json"], `JSON type \`${s.json}\` is not declared under \`jsonTypes\` of the revision.`);
          schema = { kind: "json", name: s.json };
        } else if (s.mapOf) schema = { kind: "mapOfString" };
        else if (s.object) schema = { kind: "object" };
        else schema = { kind: "any" };
      }
      fields.push({
        name: f.name,
        type: f.type,
        length,
        invalid: f.invalid,
        schema,
        ...(f.postcard ? { postcard: f.postcard } : {}),
        ...(f.max !== undefined ? { max: f.max, invalidField } : {}),
        ...(entry ? { entry } : {}),
        doc: f.doc,
      });
    });
    const endsInRest = fields.length > 0 && fields[fields.length - 1]!.length === "rest";
    if (raw.exact) {
      requireVariant(file, [...path, "exact"], errorTypeId, raw.exact, "the body's `exact`", ["length"]);
      if (fields.some((f) => f.length !== "fixed")) fail(file, [...path, "exact"], "only a body of fixed-width fields can demand an exact length.");
    } else if (!endsInRest && raw.trailing !== "ignore") {
      fail(file, path, "the body says neither what follows its last field: add `exact: <ErrorVariant>` to refuse any other length, or `trailing: ignore`.");
    }
    if (raw.truncated) requireVariant(file, [...path, "truncated"], errorTypeId, raw.truncated, "the body's `truncated`");
    else if (needsTruncated && !raw.exact) fail(file, path, "the body has fixed-width fields or length prefixes, so it must name the error raised when they run short (`truncated:`).");
    return { fields, errorTypeId, truncated: raw.truncated, exact: raw.exact, trailing: raw.trailing === "ignore" ? "ignore" : "none" };
  };

  const postcardTypes = buildPostcardTypes(gather("postcardTypes"), fail);
  const postcardKnown = new Map(postcardTypes.map((t) => [t.id, t.name]));
  const frames: IrFrame[] = [];
  for (const entry of expanded) {
    const f = entry.value;
    const { file, path } = entry;
    if (!errorById.has(f.error)) {
      fail(file, [...path, "error"], `frame \`${f.id}\` names error type \`${f.error}\`, which no file of the revision declares.`);
      continue;
    }
    let header: IrFrame["header"];
    if (f.header) {
      const hnames = new Set<string>();
      for (const [i, h] of (f.header.fields as Raw[]).entries()) {
        if (hnames.has(h.name)) fail(file, [...path, "header", "fields", i, "name"], `header field \`${h.name}\` appears twice.`);
        hnames.add(h.name);
      }
      requireVariant(file, [...path, "header", "truncated"], f.error, f.header.truncated, "the header's `truncated`");
      header = { fields: f.header.fields, truncated: f.header.truncated };
    }
    let sw: IrSwitch | undefined;
    if (f.switch) {
      const s = f.switch as Raw;
      const onField = (f.header?.fields as Raw[] | undefined)?.find((h) => h.name === s.on);
      if (!onField) fail(file, [...path, "switch", "on"], `the switch reads \`${s.on}\`, which is not a header field of \`${f.id}\`.`);
      requireVariant(file, [...path, "switch", "unknown"], f.error, s.unknown, "the switch's `unknown`", [s.on]);
      const named = (f.header?.fields as Raw[] | undefined)?.findIndex((h) => h.name === DISCRIMINANT && h.name !== s.on) ?? -1;
      if (named >= 0) fail(file, [...path, "header", "fields", named, "name"], `header field \`${DISCRIMINANT}\` has the name every decoded union names its variant in.`);
      const max = onField ? 2 ** (8 * INT_SIZE[onField.type as IntType]) - 1 : 255;
      const tags = new Map<number, string>();
      const vnames = new Set<string>();
      const variants: IrVariant[] = [];
      const variantPaths: number[] = f.__variantPaths ?? (s.variants as Raw[]).map((_: Raw, i: number) => i);
      (s.variants as Raw[]).forEach((v, k) => {
        const at = [...path, "switch", "variants", variantPaths[k]!];
        if (tags.has(v.tag)) fail(file, [...at, "tag"], `tag ${v.tag} of \`${f.id}\` is given to both \`${tags.get(v.tag)}\` and \`${v.name}\`.`);
        if (v.tag > max) fail(file, [...at, "tag"], `tag ${v.tag} does not fit the ${onField?.type} that carries it.`);
        tags.set(v.tag, v.name);
        if (vnames.has(v.name)) fail(file, [...at, "name"], `variant name \`${v.name}\` appears twice in \`${f.id}\`.`);
        vnames.add(v.name);
        const body = buildBody(v.body, f.error, file, [...at, "body"], [f.id]);
        const clash = body.fields.find((bf) => bf.name === s.property || bf.name === DISCRIMINANT || (f.header.fields as Raw[]).some((h) => h.name === bf.name && h.name !== s.on));
        if (clash) fail(file, [...at, "body"], `field \`${clash.name}\` of variant \`${v.name}\` has the name of a header field or of the discriminant.`);
        variants.push({ tag: v.tag, name: v.name, doc: v.doc, body, answer: v.answer, path: v.path });
      });
      sw = { on: s.on, property: s.property, unknown: s.unknown, variants };
    }
    const body = f.body ? buildBody(f.body, f.error, file, [...path, "body"], [f.id]) : undefined;
    let postcard: IrPostcardShape | undefined;
    if (f.postcard) {
      postcard = buildPostcardShape(f.postcard, postcardKnown, file, [...path, "postcard"], fail);
      checkPostcardErrorType(errorById.get(f.error)?.value.variants, file, [...path, "error"], f.error, fail);
      if (f.header) fail(file, [...path, "header"], "a header belongs to a tagged frame; a postcard frame has none.");
    }
    if (f.body && f.header) fail(file, [...path, "header"], "a header belongs to a tagged frame; a frame with a plain body has none.");
    if (f.switch && !f.header) fail(file, [...path, "switch"], "a tagged frame needs a header that carries its tag.");

    const examples: IrExample[] = [];
    for (const [i, e] of ((f.examples ?? []) as Raw[]).entries()) {
      const at = [...path, "examples", f.direction ? (frameRaw.find((r) => r.value.id === f.family?.id)?.value.examples as Raw[]).indexOf(e) : i];
      let bytes: Uint8Array;
      try {
        bytes = e.hex !== undefined ? hexToBytes(e.hex) : bytesFromParts(e.bytes);
      } catch (problem) {
        fail(file, at, `example "${e.name}": ${(problem as Error).message}`);
        continue;
      }
      if (!e.value === !e.error) fail(file, at, `example "${e.name}" must give either the decoded \`value\` or the expected \`error\`.`);
      if (e.error) {
        requireVariant(file, [...at, "error", "variant"], f.error, e.error.variant, `example "${e.name}"`);
        if (!e.error.message === !e.error.messagePrefix) fail(file, [...at, "error"], `example "${e.name}" must give the exact \`message\` or, where the parser's wording follows, the \`messagePrefix\`.`);
      }
      examples.push({ name: e.name, bytes, value: e.value, roundTrip: e.roundTrip !== false, error: e.error });
    }
    let published: IrPublished | undefined;
    if (f.published) {
      if (!sw) fail(file, [...path, "published"], "only a tagged frame has a tag table to compare with a published one.");
      const seen = new Set<number>();
      for (const [i, p] of (f.published.tags as Raw[]).entries()) {
        const at = [...path, "published", "tags", i];
        if (seen.has(p.tag)) fail(file, [...at, "tag"], `tag ${p.tag} is listed twice under \`published\`.`);
        seen.add(p.tag);
        const ours = sw?.variants.find((v) => v.tag === p.tag);
        if (ours && ours.name === p.published) fail(file, [...at, "published"], `tag ${p.tag} is \`${ours.name}\` in both tables; list only the tags whose meaning differs.`);
      }
      published = { source: f.published.source, doc: f.published.doc, tags: [...(f.published.tags as Raw[])].sort((a, b) => a.tag - b.tag).map((p) => ({ tag: p.tag, published: p.published, doc: p.doc })) };
    }
    frames.push({
      ...(published ? { published } : {}),
      id: f.id,
      name: f.name,
      title: f.title,
      doc: f.doc,
      errorTypeId: f.error,
      malformed: f.malformed,
      header,
      switch: sw,
      body,
      ...(postcard ? { postcard } : {}),
      rules: f.rules ?? [],
      examples,
      direction: f.direction,
      family: f.family,
      file: file.path,
    });
  }

  // A variant's TypeScript type is the frame's name and the variant's: it must not be another name.
  const takenNames = new Map<string, string>([...frameNames, ...errorNames]);
  for (const frame of frames) {
    for (const v of frame.switch?.variants ?? []) {
      const typeName = `${frame.name}${v.name}`;
      const owner = takenNames.get(typeName);
      if (owner !== undefined && owner !== frame.id) {
        const entry = expanded.find((e) => e.value.id === frame.id)!;
        fail(entry.file, [...entry.path, "switch"], `variant \`${v.name}\` of \`${frame.id}\` is the TypeScript type \`${typeName}\`, which is already the name of \`${owner}\`.`);
      }
    }
  }

  const errorTypes: IrErrorType[] = [];
  for (const entry of errorRaw) {
    const t = entry.value;
    const variants: IrErrorVariant[] = [];
    const vnames = new Set<string>();
    for (const [i, v] of (t.variants as Raw[]).entries()) {
      const at = [...entry.path, "variants", i];
      if (vnames.has(v.name)) fail(entry.file, [...at, "name"], `error variant \`${v.name}\` appears twice in \`${t.id}\`.`);
      vnames.add(v.name);
      const fields: IrErrorField[] = ((v.fields ?? []) as Raw[]).map((field) => ({
        name: field.name,
        type: field.type,
        errorTypeId: field.error,
        redacted: field.redacted === true,
        doc: field.doc,
      }));
      for (const [j, field] of fields.entries()) {
        if (field.type === "error" && (!field.errorTypeId || !errorById.has(field.errorTypeId))) {
          fail(entry.file, [...at, "fields", j], `field \`${field.name}\` of type error must name a declared error type (\`error:\`).`);
        }
      }
      const placeholders = [...(v.message as string).matchAll(/\{([a-z_][a-z0-9_]*)\}/g)].map((m) => m[1]!);
      for (const p of placeholders) {
        if (!fields.some((field) => field.name === p)) fail(entry.file, [...at, "message"], `message of \`${v.name}\` quotes \`{${p}}\`, which is not one of its fields.`);
      }
      variants.push({ name: v.name, doc: v.doc, message: v.message, fields });
    }
    errorTypes.push({ id: t.id, name: t.name, doc: t.doc, variants, usedBy: frames.filter((f) => f.errorTypeId === t.id).map((f) => f.id) });
  }

  // An answer: its frame declared (or pending, or none for raw bytes), its pattern, its last variant.
  const buildAnswer = (raw: Raw, file: SourceFile, path: readonly PathKey[], who: string): IrAnswer => {
    const messages = raw.messages as AnswerPattern;
    if (messages === "raw") {
      if (raw.frame) fail(file, [...path, "frame"], `${who} is answered with raw bytes, so it names no answer frame.`);
      return { frameId: undefined, messages };
    }
    if (!raw.frame) {
      fail(file, path, `${who} must name its answer frame (\`frame:\`); only raw bytes have none.`);
      return { frameId: undefined, messages };
    }
    const frame = frames.find((f) => f.id === raw.frame);
    if (!frame && !raw.pending) fail(file, [...path, "frame"], `${who} is answered with frame \`${raw.frame}\`, which no file of the revision declares (mark it \`pending: true\` if a later change declares it).`);
    if (raw.last !== undefined) {
      if (messages !== "perNotification" && messages !== "perItem") fail(file, [...path, "last"], `${who}: only a stream of messages (\`perNotification\`, \`perItem\`) has a last variant.`);
      else if (frame && !frame.switch?.variants.some((v) => v.name === raw.last)) fail(file, [...path, "last"], `${who}: the last variant \`${raw.last}\` is not a variant of \`${raw.frame}\`.`);
    }
    return { frameId: frame?.id, ...(frame ? {} : { pendingFrameId: raw.frame }), messages, ...(raw.last !== undefined ? { last: raw.last } : {}) };
  };

  const exchanges: IrExchange[] = [];
  const exchangeRaw = gather("exchanges");
  for (const entry of exchangeRaw) {
    const x = entry.value;
    const ask = frames.find((f) => f.id === x.askFrame);
    if (!ask) fail(entry.file, [...entry.path, "askFrame"], `exchange \`${x.id}\` is asked with frame \`${x.askFrame}\`, which no file of the revision declares.`);
    if (exchanges.some((e) => e.id === x.id)) fail(entry.file, [...entry.path, "id"], `exchange id \`${x.id}\` is declared twice.`);
    if (exchanges.some((e) => e.askFrameId === x.askFrame && e.kind === x.kind)) fail(entry.file, [...entry.path, "kind"], `kind ${x.kind} of \`${x.askFrame}\` is given to two exchanges.`);
    const answer = buildAnswer(x.answer, entry.file, [...entry.path, "answer"], `exchange \`${x.id}\``);
    const variant = ask?.switch?.variants.find((v) => v.tag === x.kind);
    if (ask && !variant) fail(entry.file, [...entry.path, "kind"], `exchange \`${x.id}\` has kind ${x.kind}, which frame \`${x.askFrame}\` does not list.`);
    if (variant && variant.answer !== x.id) fail(entry.file, [...entry.path, "id"], `kind ${x.kind} of \`${x.askFrame}\` should say \`answer: ${x.id}\`.`);
    exchanges.push({
      id: x.id,
      kind: x.kind,
      ask: x.ask,
      askFrameId: x.askFrame,
      variantName: variant?.name ?? "",
      payload: x.payload,
      path: x.path,
      answerFrameId: answer.frameId,
      ...(answer.pendingFrameId ? { pendingAnswerFrameId: answer.pendingFrameId } : {}),
      messages: answer.messages,
      ...(answer.last !== undefined ? { last: answer.last } : {}),
      unanswered: x.unanswered,
      notServed: x.notServed,
      ...(x.standing ? { standing: { afterIds: x.standing.after as string[], ended: x.standing.ended } } : {}),
    });
  }
  // A standing exchange is a stream, asked after exchanges the same ask frame starts.
  for (const entry of exchangeRaw) {
    const x = entry.value;
    if (!x.standing) continue;
    if (!["perNotification", "perItem"].includes(x.answer.messages)) fail(entry.file, [...entry.path, "standing"], `exchange \`${x.id}\` is standing, so it must be answered with a stream of messages.`);
    for (const [i, id] of (x.standing.after as string[]).entries()) {
      const after = exchanges.find((e) => e.id === id);
      if (!after || after.askFrameId !== x.askFrame || id === x.id) fail(entry.file, [...entry.path, "standing", "after", i], `exchange \`${x.id}\` is asked after \`${id}\`, which is not another exchange of \`${x.askFrame}\`.`);
    }
  }
  // Every kind of an ask frame that exchanges use has its exchange, so every kind has an answer path.
  for (const askId of new Set(exchanges.map((x) => x.askFrameId))) {
    const ask = frames.find((f) => f.id === askId);
    const at = exchangeRaw.find((e) => e.value.askFrame === askId)!;
    for (const v of ask?.switch?.variants ?? []) {
      if (!exchanges.some((x) => x.askFrameId === askId && x.kind === v.tag)) fail(at.file, at.path, `kind ${v.tag} (\`${v.name}\`) of \`${askId}\` has no exchange: every kind needs its answer path and answer.`);
    }
  }
  const exchangeGroups: IrExchangeGroup[] = gather("exchangeGroups").map((entry) => {
    const g = entry.value;
    for (const [i, id] of (g.exchanges as string[]).entries()) {
      if (!exchanges.some((x) => x.id === id)) fail(entry.file, [...entry.path, "exchanges", i], `group \`${g.id}\` lists exchange \`${id}\`, which no file of the revision declares.`);
    }
    const rules = (g.rules as Raw[]).map((r, i) => {
      for (const [j, id] of ((r.exchanges ?? []) as string[]).entries()) {
        if (!(g.exchanges as string[]).includes(id)) fail(entry.file, [...entry.path, "rules", i, "exchanges", j], `rule \`${r.id}\` of group \`${g.id}\` names exchange \`${id}\`, which the group does not list.`);
      }
      return { id: r.id, title: r.title, text: r.text, ...(r.exchanges ? { exchangeIds: r.exchanges as string[] } : {}) };
    });
    return { id: g.id, title: g.title, summary: g.summary, exchangeIds: g.exchanges, rules };
  });
  const channelRaw = gather("channels");
  const channelTables: IrChannelTable[] = gather("channelTables").map((entry) => {
    const t = entry.value;
    for (const [i, table] of (t.tables as Raw[]).entries()) {
      if (!frames.some((f) => f.id === table.frame)) fail(entry.file, [...entry.path, "tables", i, "frame"], `channel table lists frame \`${table.frame}\`, which no file of the revision declares.`);
    }
    const mine = channelRaw.filter((c) => c.value.table === t.id);
    const tables = (t.tables as Raw[]).map((table) => {
      const frame = frames.find((f) => f.id === table.frame);
      const channels: IrChannel[] = [];
      for (const c of mine.filter((c) => c.value.opener === table.opener)) {
        const v = c.value;
        const who = `channel ${v.tag} the ${v.opener} opens on \`${t.id}\``;
        const variant = frame?.switch?.variants.find((fv) => fv.tag === v.tag);
        if (frame && !variant) fail(c.file, [...c.path, "tag"], `${who}: \`${table.frame}\` has no tag ${v.tag}.`);
        if (channels.some((o) => o.tag === v.tag)) fail(c.file, [...c.path, "tag"], `${who} is described twice.`);
        const answer = buildAnswer(v.answer, c.file, [...c.path, "answer"], who);
        if (v.exchange !== undefined) {
          const x = exchanges.find((e) => e.id === v.exchange);
          if (!x) fail(c.file, [...c.path, "exchange"], `${who} carries exchange \`${v.exchange}\`, which no file of the revision declares.`);
          else {
            if ((x.answerFrameId ?? x.pendingAnswerFrameId) !== (answer.frameId ?? answer.pendingFrameId)) fail(c.file, [...c.path, "answer"], `${who} carries exchange \`${x.id}\`, so it is answered with the exchange's frame \`${x.answerFrameId ?? x.pendingAnswerFrameId}\`.`);
            if (x.messages !== answer.messages) fail(c.file, [...c.path, "answer", "messages"], `${who} carries exchange \`${x.id}\`, so its messages come as the exchange's do (\`${x.messages}\`).`);
            // One exchange may ride several begin scopes (tools and agents), one channel on each, and
            // then under the same opener, tag and variant name, so its descriptor's channel fits all.
            const carriers = ((x as { channels?: NonNullable<IrExchange["channel"]>[] }).channels ??= []);
            if (carriers.some((o) => o.tableId === t.id)) fail(c.file, [...c.path, "exchange"], `exchange \`${x.id}\` is carried by two channels of \`${t.id}\`.`);
            else if (variant && carriers.length > 0 && (carriers[0]!.opener !== table.opener || carriers[0]!.tag !== v.tag || carriers[0]!.variantName !== variant.name)) {
              fail(c.file, [...c.path, "exchange"], `exchange \`${x.id}\` is carried as tag ${carriers[0]!.tag} (\`${carriers[0]!.variantName}\`, opened by the ${carriers[0]!.opener}) on \`${carriers[0]!.tableId}\`, so on \`${t.id}\` it must be carried the same way.`);
            }
            if (variant) {
              const carrier = { tableId: t.id, opener: table.opener, tag: v.tag, variantName: variant.name };
              carriers.push(carrier);
              (x as { channel?: IrExchange["channel"] }).channel ??= carrier;
            }
          }
        }
        channels.push({ tag: v.tag, variantName: variant?.name ?? "", bareFinish: v.bareFinish, ...(v.exchange !== undefined ? { exchangeId: v.exchange } : {}), answer, ...(v.doc ? { doc: v.doc } : {}) });
      }
      // Once a table describes its channels, it describes every one of them.
      if (mine.length > 0) {
        for (const fv of frame?.switch?.variants ?? []) {
          if (!channels.some((c) => c.tag === fv.tag)) fail(entry.file, [...entry.path, "tables"], `tag ${fv.tag} (\`${fv.name}\`) of \`${table.frame}\`, opened by the ${table.opener}, has no channel description (\`channels:\`).`);
        }
      }
      return { opener: table.opener, frameId: table.frame, channels: channels.sort((a, b) => a.tag - b.tag) };
    });
    return { id: t.id, title: t.title, doc: t.doc, providerAsks: t.providerAsks ?? `${pascalOf(t.id)}ProviderAsks`, tables };
  });
  for (const [i, t] of channelTables.entries()) {
    const first = channelTables.findIndex((o) => o.providerAsks === t.providerAsks);
    const entry = gather("channelTables")[i]!;
    if (first !== i) fail(entry.file, [...entry.path, "providerAsks"], `channel tables \`${channelTables[first]!.id}\` and \`${t.id}\` would both generate \`${t.providerAsks}\`; give one of them its own \`providerAsks\`.`);
    else if (takenNames.has(t.providerAsks) || jsonNames.has(t.providerAsks)) fail(entry.file, [...entry.path, "providerAsks"], `\`${t.providerAsks}\` is already the name of a frame, error or JSON type.`);
  }
  for (const c of channelRaw) {
    const table = channelTables.find((t) => t.id === c.value.table);
    if (!table) fail(c.file, [...c.path, "table"], `channel names table \`${c.value.table}\`, which no file of the revision declares.`);
    else if (!table.tables.some((r) => r.opener === c.value.opener)) fail(c.file, [...c.path, "opener"], `table \`${table.id}\` lists no channels the ${c.value.opener} opens.`);
  }

  const openedPaths: IrOpenedPath[] = gather("openedPaths").map((entry) => {
    const p = entry.value;
    const who = `path \`${p.path}\``;
    const req = p.request as Raw;
    let requestFrame: IrFrame | undefined;
    if (req.messages === "none") {
      if (req.frame) fail(entry.file, [...entry.path, "request", "frame"], `${who}: a request of no message names no frame.`);
    } else if (!req.frame) fail(entry.file, [...entry.path, "request"], `${who} must name its request frame (\`frame:\`).`);
    else {
      requestFrame = frames.find((f) => f.id === req.frame);
      if (!requestFrame && !req.pending) fail(entry.file, [...entry.path, "request", "frame"], `${who} sends frame \`${req.frame}\`, which no file of the revision declares (mark it \`pending: true\` if a later change declares it).`);
    }
    return {
      id: p.id,
      path: p.path,
      title: p.title,
      doc: p.doc,
      request: { frameId: requestFrame?.id, ...(req.frame && !requestFrame ? { pendingFrameId: req.frame } : {}), messages: req.messages },
      answer: buildAnswer(p.answer, entry.file, [...entry.path, "answer"], who),
      closedBy: p.closedBy,
    };
  });
  const openedPathGroups: IrOpenedPathGroup[] = gather("openedPathGroups").map((entry) => {
    const g = entry.value;
    for (const [i, id] of (g.paths as string[]).entries()) {
      if (!openedPaths.some((p) => p.id === id)) fail(entry.file, [...entry.path, "paths", i], `group \`${g.id}\` lists path \`${id}\`, which no file of the revision declares.`);
    }
    return { id: g.id, title: g.title, summary: g.summary, pathIds: g.paths, rules: (g.rules as Raw[]).map((r) => ({ id: r.id, title: r.title, text: r.text })) };
  });

  if (errors.length > 0) throw new SpecErrors(errors);

  const hash = createHash("sha256");
  for (const file of loaded.files) hash.update(file.path.split("/").pop()!).update("\0").update(file.text).update("\0");
  return {
    revision: String(revision.value),
    title: single("title")?.value ?? "",
    mcpRevision: single("mcpRevision")?.value ?? "",
    doc: single("doc")?.value ?? "",
    ports: single("ports")?.value ?? [],
    mcpTypes,
    frames,
    errorTypes,
    channelTables,
    exchanges,
    exchangeGroups,
    openedPaths,
    openedPathGroups,
    postcardTypes,
    jsonTypes,
    sourceHash: hash.digest("hex"),
  };
}

export function hexToBytes(hex: string): Uint8Array {
  const clean = hex.replace(/\s+/g, "");
  if (clean.length % 2 !== 0) throw new Error(`hex "${hex}" has an odd number of digits.`);
  if (!/^[0-9a-fA-F]*$/.test(clean)) throw new Error(`hex "${hex}" has a character that is not a hex digit.`);
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesFromParts(parts: readonly (string | { text: string } | { repeat: string; times: number })[]): Uint8Array {
  const chunks = parts.map((part) => {
    if (typeof part === "string") return hexToBytes(part);
    if ("text" in part) return new TextEncoder().encode(part.text);
    const one = hexToBytes(part.repeat);
    const out = new Uint8Array(one.length * part.times);
    for (let i = 0; i < part.times; i++) out.set(one, i * one.length);
    return out;
  });
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

export function bytesToHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

function unescapePointer(part: string): PathKey {
  const text = part.replace(/~1/g, "/").replace(/~0/g, "~");
  return /^\d+$/.test(text) ? Number(text) : text;
}

/** ajv reports every branch of a oneOf; keep the errors that say something a person can act on. */
function pickSchemaErrors(list: readonly ErrorObject[]): ErrorObject[] {
  const useful = list.filter((e) => e.keyword !== "oneOf" && e.keyword !== "anyOf" && e.keyword !== "not" && e.keyword !== "if");
  const chosen = useful.length > 0 ? useful : [...list];
  const seen = new Set<string>();
  return chosen.filter((e) => {
    const key = `${e.instancePath}|${e.message}|${JSON.stringify(e.params)}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function describeSchemaError(problem: ErrorObject, path: readonly PathKey[]): string {
  const where = path.length > 0 ? `\`${path.join(".")}\`` : "the file";
  const p = problem.params as Raw;
  switch (problem.keyword) {
    case "required":
      return `${where} is missing \`${p.missingProperty}\`.`;
    case "additionalProperties":
      return `${where} has \`${p.additionalProperty}\`, which the spec schema does not know (a misspelling?).`;
    case "enum":
      return `${where} must be one of ${(p.allowedValues as unknown[]).map((v) => `\`${String(v)}\``).join(", ")}.`;
    case "const":
      return `${where} must be \`${String(p.allowedValue)}\`.`;
    case "type":
      return `${where} must be ${p.type === "object" ? "a mapping" : p.type === "array" ? "a list" : `a ${p.type}`}.`;
    case "pattern":
      return `${where} does not have the expected form (${p.pattern}).`;
    default:
      return `${where} ${problem.message ?? "is not valid"}.`;
  }
}

/** `tools-begin/channels` → `ToolsBeginChannels`. */
function pascalOf(id: string): string {
  return id
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");
}
