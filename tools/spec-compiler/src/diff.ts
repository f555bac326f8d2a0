// `diverge-spec diff <a> <b>`: the evolution checker. It lists every change between two revisions
// and classifies it, in the spirit of Kafka's message-spec EvolutionVerifier:
//   forbidden  the same bytes would mean something else: a tag or kind reused for a different meaning,
//              a listed tag removed or renumbered, a layout or width changed in place, an error text changed;
//   breaking   code written against the old revision stops compiling or working: something removed or renamed;
//   additive   something new: a tag, a kind, an exchange, a frame, an error variant;
//   editorial  docs, rules and examples only.
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildIr, type IrBody, type IrExchange, type IrField, type IrFrame, type IrRevision } from "./ir.js";
import { loadSpecDir } from "./load.js";
import { compareRevisions, REVISION_PATTERN } from "./bump.js";
import { comparePostcardShapes } from "./postcard-diff.js";

export type ChangeClass = "forbidden" | "breaking" | "additive" | "editorial";
export const CLASSES: readonly ChangeClass[] = ["forbidden", "breaking", "additive", "editorial"];

/** What part of the spec a change is in; the changeset's summary groups by it. */
export type ChangeArea = "tag" | "frame" | "error" | "exchange" | "channel" | "mcp" | "port" | "revision";

export interface Change {
  readonly class: ChangeClass;
  readonly area: ChangeArea;
  /** The frame, error type, exchange, table, MCP type or port the change is in. */
  readonly subject: string;
  /** For a change to one variant of a tagged frame: its tag (or kind, or type). */
  readonly tag?: number;
  /** One sentence naming the subject, the tag, and what it was and is. */
  readonly sentence: string;
}

export type Bump = "major" | "minor" | "patch";

export interface Evolution {
  readonly from: string;
  readonly to: string;
  readonly changes: readonly Change[];
  /** The highest class among the changes; undefined when the revisions are the same. */
  readonly level?: ChangeClass;
  /** The package bump the changes need: breaking → major, additive → minor, else patch; none when forbidden. */
  readonly needs?: Bump;
  /** The step from `from` to `to` as version numbers. */
  readonly step?: Bump;
  /** The bump to release with: the larger of `needs` and `step`, so versions follow the revision. */
  readonly bump?: Bump;
  /** Problems besides forbidden changes that make the diff fail (a revision step too small for the changes). */
  readonly problems: readonly string[];
  /** True when the evolution is allowed: no forbidden change, no problem. */
  readonly ok: boolean;
}

// ---------------------------------------------------------------------------------------------
// Loading the two sides: a revision under spec/ by name, or any spec folder by path.

export function loadRevisionArg(root: string, arg: string, cwd: string = process.cwd()): IrRevision {
  const schema = join(root, "spec", "spec.schema.json");
  const named = join(root, "spec", arg);
  if (REVISION_PATTERN.test(arg) && existsSync(named)) return buildIr(loadSpecDir(named, root), schema);
  const path = resolve(cwd, arg);
  if (existsSync(path) && statSync(path).isDirectory()) return buildIr(loadSpecDir(path, root), schema);
  throw new Error(
    REVISION_PATTERN.test(arg) ? `there is no spec/${arg}, and no folder ${arg} here.` : `"${arg}" is neither a revision under spec/ nor a spec folder.`,
  );
}

// ---------------------------------------------------------------------------------------------

const RANK: Record<ChangeClass, number> = { editorial: 0, additive: 1, breaking: 2, forbidden: 3 };
const BUMP_RANK: Record<Bump, number> = { patch: 0, minor: 1, major: 2 };

export function revisionStep(from: string, to: string): Bump | undefined {
  if (!REVISION_PATTERN.test(from) || !REVISION_PATTERN.test(to) || compareRevisions(to, from) <= 0) return undefined;
  const [a, b] = [from.split(".").map(Number), to.split(".").map(Number)];
  if (a[0] !== b[0]) return "major";
  if (a[1] !== b[1]) return "minor";
  return "patch";
}

/** The smallest revision after `from` that a bump of `kind` allows. */
export function nextRevision(from: string, kind: Bump): string {
  const [major, minor, patch] = from.split(".").map(Number) as [number, number, number];
  if (kind === "major") return `${major + 1}.0.0`;
  if (kind === "minor") return `${major}.${minor + 1}.0`;
  return `${major}.${minor}.${patch + 1}`;
}

export function diffRevisions(a: IrRevision, b: IrRevision): Evolution {
  const changes = compare(a, b);
  const level = changes.reduce<ChangeClass | undefined>((top, c) => (top === undefined || RANK[c.class] > RANK[top] ? c.class : top), undefined);
  const needs: Bump | undefined = level === "forbidden" ? undefined : level === "breaking" ? "major" : level === "additive" ? "minor" : "patch";
  const step = revisionStep(a.revision, b.revision);
  const problems: string[] = [];
  if (REVISION_PATTERN.test(a.revision) && REVISION_PATTERN.test(b.revision) && compareRevisions(b.revision, a.revision) <= 0) {
    problems.push(`${b.revision} is not newer than ${a.revision}; a diff runs from the older revision to the newer.`);
  }
  if (needs && step && BUMP_RANK[step] < BUMP_RANK[needs]) {
    problems.push(
      `${a.revision} → ${b.revision} is a ${step} step, but the changes are ${level} and need a ${needs} one: name the new revision ${nextRevision(a.revision, needs)} (or higher) so the packages' versions follow it.`,
    );
  }
  const bump = needs === undefined ? undefined : step && BUMP_RANK[step] > BUMP_RANK[needs] ? step : needs;
  const ok = level !== "forbidden" && problems.length === 0;
  return { from: a.revision, to: b.revision, changes, level, needs, step, bump, problems, ok };
}

// ---------------------------------------------------------------------------------------------
// The comparison itself. Every sentence reads "<subject>: <what> in <a> and <what> in <b>".

function compare(a: IrRevision, b: IrRevision): Change[] {
  const out: Change[] = [];
  const A = a.revision;
  const B = b.revision;
  const add = (c: Change) => out.push(c);

  // Revision-wide facts.
  if (a.mcpRevision !== b.mcpRevision) {
    add({ class: "breaking", area: "revision", subject: "revision", sentence: `the MCP revision was ${a.mcpRevision} in ${A} and is ${b.mcpRevision} in ${B}.` });
  }
  if (a.doc !== b.doc) add({ class: "editorial", area: "revision", subject: "revision", sentence: `the revision's description changed.` });
  for (const [name, pa, pb] of pair(a.ports, b.ports, (p) => p.name)) {
    if (!pb) add({ class: "breaking", area: "port", subject: name, sentence: `port ${name} (${pa!.number}) is listed in ${A} and gone in ${B}.` });
    else if (!pa) add({ class: "additive", area: "port", subject: name, sentence: `new port ${name} (${pb.number}).` });
    else if (pa.number !== pb.number) add({ class: "breaking", area: "port", subject: name, sentence: `port ${name} was ${pa.number} in ${A} and is ${pb.number} in ${B}.` });
    else if (pa.doc !== pb.doc) add({ class: "editorial", area: "port", subject: name, sentence: `the description of port ${name} changed.` });
  }
  for (const [name, ta, tb] of pair(a.mcpTypes, b.mcpTypes, (t) => t.name)) {
    const spell = (t: { schema: string; member?: string }) => `${t.schema}${t.member ? `.${t.member}` : ""}`;
    if (!tb) add({ class: "breaking", area: "mcp", subject: name, sentence: `MCP type ${name} is declared in ${A} and gone in ${B}.` });
    else if (!ta) add({ class: "additive", area: "mcp", subject: name, sentence: `new MCP type ${name} (${spell(tb)}).` });
    else if (spell(ta) !== spell(tb)) add({ class: "breaking", area: "mcp", subject: name, sentence: `MCP type ${name} was checked with ${spell(ta)} in ${A} and is checked with ${spell(tb)} in ${B}.` });
    else if (ta.doc !== tb.doc) add({ class: "editorial", area: "mcp", subject: name, sentence: `the description of MCP type ${name} changed.` });
  }

  // Named JSON types: a new one is additive; a changed shape reads the same JSON another way.
  for (const [name, ta, tb] of pair(a.jsonTypes ?? [], b.jsonTypes ?? [], (t) => t.name)) {
    const shape = (t: NonNullable<typeof ta>) => JSON.stringify(t.shape, (k, v) => (k === "doc" ? undefined : v));
    if (!tb) add({ class: "breaking", area: "mcp", subject: name, sentence: `JSON type ${name} is declared in ${A} and gone in ${B}.` });
    else if (!ta) add({ class: "additive", area: "mcp", subject: name, sentence: `new JSON type ${name}.` });
    else if (shape(ta) !== shape(tb)) add({ class: "breaking", area: "mcp", subject: name, sentence: `JSON type ${name} has another shape in ${B} than in ${A}.` });
    else if (JSON.stringify(ta, (k, v) => (k === "file" ? undefined : v)) !== JSON.stringify(tb, (k, v) => (k === "file" ? undefined : v))) add({ class: "editorial", area: "mcp", subject: name, sentence: `the description of JSON type ${name} changed.` });
  }

  // Named postcard types.
  for (const [id, ta, tb] of pair(a.postcardTypes ?? [], b.postcardTypes ?? [], (t) => t.id)) {
    if (!tb) add({ class: "breaking", area: "frame", subject: id, sentence: `postcard type ${id} (${ta!.name}) is declared in ${A} and gone in ${B}.` });
    else if (!ta) add({ class: "additive", area: "frame", subject: id, sentence: `new postcard type ${id} (${tb.name}).` });
    else {
      for (const c of comparePostcardShapes(ta.shape, tb.shape, `postcard type ${id}`, A, B)) add({ ...c, area: "frame", subject: id });
      if (ta.name !== tb.name) add({ class: "breaking", area: "frame", subject: id, sentence: `postcard type ${id} was named ${ta.name} in ${A} and is named ${tb.name} in ${B}.` });
      if (ta.doc !== tb.doc) add({ class: "editorial", area: "frame", subject: id, sentence: `the description of postcard type ${id} changed.` });
    }
  }

  // Frames.
  for (const [id, fa, fb] of pair(a.frames, b.frames, (f) => f.id)) {
    if (!fb) {
      add({ class: "breaking", area: "frame", subject: id, sentence: `frame ${id} (${fa!.name}) is declared in ${A} and gone in ${B}.` });
      continue;
    }
    if (!fa) {
      add({ class: "additive", area: "frame", subject: id, sentence: `new frame ${id} (${fb.name}).` });
      continue;
    }
    compareFrame(fa, fb, A, B, add);
  }

  // Error types and their texts.
  for (const [id, ea, eb] of pair(a.errorTypes, b.errorTypes, (e) => e.id)) {
    if (!eb) {
      add({ class: "breaking", area: "error", subject: id, sentence: `error type ${id} (${ea!.name}) is declared in ${A} and gone in ${B}.` });
      continue;
    }
    if (!ea) {
      add({ class: "additive", area: "error", subject: id, sentence: `new error type ${id} (${eb.name}).` });
      continue;
    }
    if (ea.name !== eb.name) add({ class: "breaking", area: "error", subject: id, sentence: `${id}: the error class was ${ea.name} in ${A} and is ${eb.name} in ${B}.` });
    if (ea.doc !== eb.doc) add({ class: "editorial", area: "error", subject: id, sentence: `${id}: the description changed.` });
    for (const [name, va, vb] of pair(ea.variants, eb.variants, (v) => v.name)) {
      if (!vb) add({ class: "breaking", area: "error", subject: id, sentence: `${id}: error variant ${name} is listed in ${A} and gone in ${B}.` });
      else if (!va) add({ class: "additive", area: "error", subject: id, sentence: `${id}: new error variant ${name}, "${vb.message}".` });
      else {
        if (va.message !== vb.message) {
          add({
            class: "forbidden",
            area: "error",
            subject: id,
            sentence: `${id}: error ${name} read "${va.message}" in ${A} and reads "${vb.message}" in ${B}; an error text never changes in place (peers and tests match it exactly).`,
          });
        }
        const fields = (v: typeof va) => v.fields.map((f) => `${f.name}: ${f.type}${f.errorTypeId ? ` ${f.errorTypeId}` : ""}${f.redacted ? " (redacted)" : ""}`).join(", ");
        if (fields(va) !== fields(vb)) {
          add({ class: "breaking", area: "error", subject: id, sentence: `${id}: error ${name} carried {${fields(va)}} in ${A} and carries {${fields(vb)}} in ${B}.` });
        }
        if (va.doc !== vb.doc || va.fields.some((f, i) => vb.fields[i] && vb.fields[i]!.doc !== f.doc)) {
          add({ class: "editorial", area: "error", subject: id, sentence: `${id}: the description of error ${name} changed.` });
        }
      }
    }
  }

  // Exchanges: by id, and by the kind they occupy on their ask frame.
  const kindKey = (x: IrExchange) => `${x.askFrameId}#${x.kind}`;
  const bKinds = new Map(b.exchanges.map((x) => [kindKey(x), x]));
  const aKinds = new Map(a.exchanges.map((x) => [kindKey(x), x]));
  for (const [id, xa, xb] of pair(a.exchanges, b.exchanges, (x) => x.id)) {
    if (!xb) {
      const taker = bKinds.get(kindKey(xa!));
      if (taker && taker.id !== id) {
        add({
          class: "forbidden",
          area: "exchange",
          subject: xa!.askFrameId,
          tag: xa!.kind,
          sentence: `${xa!.askFrameId}: exchange kind ${xa!.kind} meant ${id} in ${A} and means ${taker.id} in ${B}; a kind is never reused.`,
        });
      } else add({ class: "breaking", area: "exchange", subject: id, tag: xa!.kind, sentence: `exchange ${id} (kind ${xa!.kind} of ${xa!.askFrameId}) is declared in ${A} and gone in ${B}.` });
      continue;
    }
    if (!xa) {
      if (!aKinds.has(kindKey(xb))) {
        add({ class: "additive", area: "exchange", subject: id, tag: xb.kind, sentence: `new exchange ${id}: kind ${xb.kind} of ${xb.askFrameId}, answered on ${xb.path} with ${answerOf(xb)}.` });
      }
      continue;
    }
    if (xa.askFrameId !== xb.askFrameId || xa.kind !== xb.kind) {
      add({
        class: "forbidden",
        area: "exchange",
        subject: id,
        tag: xa.kind,
        sentence: `exchange ${id} was kind ${xa.kind} of ${xa.askFrameId} in ${A} and is kind ${xb.kind} of ${xb.askFrameId} in ${B}; a kind is never renumbered.`,
      });
    }
    const wire: [string, string, string][] = [
      ["answer path", xa.path, xb.path],
      ["answer frame", answerOf(xa), answerOf(xb)],
      ["answer messages", xa.messages, xb.messages],
      ["last message", xa.last ?? "none", xb.last ?? "none"],
    ];
    for (const [what, was, is] of wire) {
      if (was !== is) add({ class: "forbidden", area: "exchange", subject: id, tag: xb.kind, sentence: `exchange ${id} (kind ${xb.kind}): the ${what} was ${was} in ${A} and is ${is} in ${B}; an exchange's wire never changes in place.` });
    }
    const behaviour: [string, string, string][] = [
      ["an unanswered exchange", xa.unanswered, xb.unanswered],
      ["an exchange not served", xa.notServed, xb.notServed],
      ["a standing stream", standingOf(xa), standingOf(xb)],
    ];
    for (const [what, was, is] of behaviour) {
      if (was !== is) add({ class: "breaking", area: "exchange", subject: id, tag: xb.kind, sentence: `exchange ${id} (kind ${xb.kind}): ${what} was ${was} in ${A} and is ${is} in ${B}.` });
    }
    if (xa.ask !== xb.ask || xa.payload !== xb.payload) add({ class: "editorial", area: "exchange", subject: id, tag: xb.kind, sentence: `exchange ${id}: the description changed.` });
  }
  for (const [id, ga, gb] of pair(a.exchangeGroups, b.exchangeGroups, (g) => g.id)) {
    if (JSON.stringify(ga) !== JSON.stringify(gb)) {
      add({ class: "editorial", area: "exchange", subject: id, sentence: !ga ? `new exchange group ${id}.` : !gb ? `exchange group ${id} is gone.` : `exchange group ${id} changed.` });
    }
  }

  // Channel tables: who opens which channel request frame.
  for (const [id, ta, tb] of pair(a.channelTables, b.channelTables, (t) => t.id)) {
    const rows = (t?: typeof ta) => new Set((t?.tables ?? []).map((r) => `${r.opener} opens ${r.frameId}`));
    const [ra, rb] = [rows(ta), rows(tb)];
    for (const r of ra) if (!rb.has(r)) add({ class: "breaking", area: "channel", subject: id, sentence: `${id}: "${r}" is listed in ${A} and gone in ${B}.` });
    for (const r of rb) if (!ra.has(r)) add({ class: "additive", area: "channel", subject: id, sentence: `${id}: new row "${r}".` });
    if (ta && tb && (ta.title !== tb.title || ta.doc !== tb.doc)) add({ class: "editorial", area: "channel", subject: id, sentence: `${id}: the description changed.` });
    // Each channel's answer: a new description is additive; a changed one changes the wire in place.
    const channels = (t?: typeof ta) => new Map((t?.tables ?? []).flatMap((r) => r.channels.map((c) => [`channel ${c.tag} the ${r.opener} opens`, `${answerOf({ answerFrameId: c.answer.frameId, pendingAnswerFrameId: c.answer.pendingFrameId, messages: c.answer.messages })}, ${c.answer.messages}${c.answer.last ? ` last ${c.answer.last}` : ""}, a bare finish means ${c.bareFinish}`] as const)));
    const [ca, cb] = [channels(ta), channels(tb)];
    for (const [k, v] of cb) {
      const was = ca.get(k);
      if (was === undefined) add({ class: "additive", area: "channel", subject: id, sentence: `${id}: ${k} is described (${v}).` });
      else if (was !== v) add({ class: "forbidden", area: "channel", subject: id, sentence: `${id}: ${k} was ${was} in ${A} and is ${v} in ${B}; a channel's wire never changes in place.` });
    }
    for (const k of ca.keys()) if (!cb.has(k)) add({ class: "breaking", area: "channel", subject: id, sentence: `${id}: ${k} is described in ${A} and not in ${B}.` });
  }

  // Paths the provider opens.
  for (const [id, pa, pb] of pair(a.openedPaths, b.openedPaths, (p) => p.id)) {
    const wire = (p: NonNullable<typeof pa>) => `${p.path}: sends ${p.request.frameId ?? p.request.pendingFrameId ?? "nothing"} (${p.request.messages}), answered with ${answerOf({ answerFrameId: p.answer.frameId, pendingAnswerFrameId: p.answer.pendingFrameId, messages: p.answer.messages })} (${p.answer.messages}${p.answer.last ? ` last ${p.answer.last}` : ""}), closed by the ${p.closedBy}`;
    if (!pb) add({ class: "breaking", area: "exchange", subject: id, sentence: `opened path ${id} (${pa!.path}) is declared in ${A} and gone in ${B}.` });
    else if (!pa) add({ class: "additive", area: "exchange", subject: id, sentence: `new opened path ${id}: ${wire(pb)}.` });
    else if (wire(pa) !== wire(pb)) add({ class: "forbidden", area: "exchange", subject: id, sentence: `opened path ${id} was ${wire(pa)} in ${A} and is ${wire(pb)} in ${B}; a path's wire never changes in place.` });
    else if (pa.title !== pb.title || pa.doc !== pb.doc) add({ class: "editorial", area: "exchange", subject: id, sentence: `opened path ${id}: the description changed.` });
  }
  for (const [id, ga, gb] of pair(a.openedPathGroups, b.openedPathGroups, (g) => g.id)) {
    if (JSON.stringify(ga) !== JSON.stringify(gb)) add({ class: "editorial", area: "exchange", subject: id, sentence: !ga ? `new opened path group ${id}.` : !gb ? `opened path group ${id} is gone.` : `opened path group ${id} changed.` });
  }
  return out;
}

function compareFrame(fa: IrFrame, fb: IrFrame, A: string, B: string, add: (c: Change) => void): void {
  const id = fa.id;
  if (fa.name !== fb.name) add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: the TypeScript name was ${fa.name} in ${A} and is ${fb.name} in ${B}.` });
  if (fa.errorTypeId !== fb.errorTypeId) add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: its errors were ${fa.errorTypeId} in ${A} and are ${fb.errorTypeId} in ${B}.` });

  const headerShape = (f: IrFrame) => (f.header ? f.header.fields.map((h) => h.type).join(" ") : "none");
  const headerText = (f: IrFrame) => (f.header ? `[${f.header.fields.map((h) => `${h.name}: ${h.type}`).join("][")}]` : "no header");
  if (headerShape(fa) !== headerShape(fb)) {
    add({ class: "forbidden", area: "frame", subject: id, sentence: `${id}: the header was ${headerText(fa)} in ${A} and is ${headerText(fb)} in ${B}; a layout or width never changes in place.` });
  } else if (headerText(fa) !== headerText(fb)) {
    add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: the header was ${headerText(fa)} in ${A} and is ${headerText(fb)} in ${B} (renamed).` });
  }
  if (fa.header && fb.header && fa.header.truncated !== fb.header.truncated) {
    add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: a short header raised ${fa.header.truncated} in ${A} and raises ${fb.header.truncated} in ${B}.` });
  }

  if (!!fa.switch !== !!fb.switch) {
    const what = (f: IrFrame) => (f.switch ? "a tagged union" : "a plain body");
    add({ class: "forbidden", area: "frame", subject: id, sentence: `${id}: the frame was ${what(fa)} in ${A} and is ${what(fb)} in ${B}; a layout never changes in place.` });
  }
  if (fa.body && fb.body) compareBody(fa.body, fb.body, `${id}: the body`, id, undefined, A, B, add, "frame");

  if (fa.switch && fb.switch) {
    const sa = fa.switch;
    const sb = fb.switch;
    const word = sb.on;
    if (sa.on !== sb.on) add({ class: "forbidden", area: "frame", subject: id, sentence: `${id}: the variant was chosen by ${sa.on} in ${A} and is chosen by ${sb.on} in ${B}; a layout never changes in place.` });
    if (sa.property !== sb.property) add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: the decoded value named its variant in \`${sa.property}\` in ${A} and names it in \`${sb.property}\` in ${B}.` });
    if (sa.unknown !== sb.unknown) add({ class: "breaking", area: "frame", subject: id, sentence: `${id}: an unknown ${word} raised ${sa.unknown} in ${A} and raises ${sb.unknown} in ${B}.` });
    const byTagB = new Map(sb.variants.map((v) => [v.tag, v]));
    const byNameB = new Map(sb.variants.map((v) => [v.name, v]));
    const byNameA = new Map(sa.variants.map((v) => [v.name, v]));
    const byTagA = new Map(sa.variants.map((v) => [v.tag, v]));
    for (const va of sa.variants) {
      const vb = byTagB.get(va.tag);
      if (!vb) {
        const moved = byNameB.get(va.name);
        if (moved) {
          add({ class: "forbidden", area: "tag", subject: id, tag: va.tag, sentence: `${id}: ${va.name} was ${word} ${va.tag} in ${A} and is ${word} ${moved.tag} in ${B}; a listed ${word} is never renumbered.` });
        } else {
          add({ class: "forbidden", area: "tag", subject: id, tag: va.tag, sentence: `${id}: ${word} ${va.tag} meant ${va.name} in ${A} and is gone in ${B}; a listed ${word} is never removed (a peer at ${A} still sends it).` });
        }
        continue;
      }
      if (vb.name !== va.name) {
        add({ class: "forbidden", area: "tag", subject: id, tag: va.tag, sentence: `${id}: ${word} ${va.tag} meant ${va.name} in ${A} and means ${vb.name} in ${B}; a listed ${word} never takes another meaning.` });
        continue;
      }
      compareBody(va.body, vb.body, `${id}: ${word} ${va.tag} (${va.name})`, id, va.tag, A, B, add, "tag");
      if ((va.answer ?? "") !== (vb.answer ?? "")) {
        add({ class: "breaking", area: "tag", subject: id, tag: va.tag, sentence: `${id}: ${word} ${va.tag} (${va.name}) was answered by exchange ${va.answer ?? "none"} in ${A} and is answered by ${vb.answer ?? "none"} in ${B}.` });
      }
      if (va.doc !== vb.doc) add({ class: "editorial", area: "tag", subject: id, tag: va.tag, sentence: `${id}: the description of ${word} ${va.tag} (${va.name}) changed.` });
    }
    for (const vb of sb.variants) {
      if (byTagA.has(vb.tag)) continue;
      const was = byNameA.get(vb.name);
      if (was && !byTagB.has(was.tag)) continue; // reported as renumbered above
      add({ class: "additive", area: "tag", subject: id, tag: vb.tag, sentence: `${id}: new ${word} ${vb.tag} (${vb.name}).` });
    }
  }

  for (const c of comparePostcardShapes(fa.postcard, fb.postcard, id, A, B)) add({ ...c, area: "frame", subject: id });

  const editorial: string[] = [];
  if (fa.title !== fb.title || fa.doc !== fb.doc) editorial.push("description");
  if ((fa.malformed ?? "") !== (fb.malformed ?? "")) editorial.push("what a malformed frame gets");
  if (JSON.stringify(fa.rules) !== JSON.stringify(fb.rules)) editorial.push("rules");
  const examples = (f: IrFrame) => new Map(f.examples.map((e) => [e.name, JSON.stringify({ ...e, bytes: Array.from(e.bytes) })]));
  const [ea, eb] = [examples(fa), examples(fb)];
  const added = [...eb.keys()].filter((n) => !ea.has(n)).length;
  const removed = [...ea.keys()].filter((n) => !eb.has(n)).length;
  const changed = [...ea.keys()].filter((n) => eb.has(n) && ea.get(n) !== eb.get(n)).length;
  if (added + removed + changed > 0) editorial.push(`examples (${[added && `${added} added`, removed && `${removed} removed`, changed && `${changed} changed`].filter(Boolean).join(", ")})`);
  if (editorial.length > 0) add({ class: "editorial", area: "frame", subject: id, sentence: `${id}: ${editorial.join(", ")} changed.` });
}

function fieldShape(f: IrField): string {
  const schema = f.schema ? ` ${f.schema.kind === "mcp" ? `mcp ${f.schema.name}` : f.schema.kind === "json" ? `json ${f.schema.name}` : f.schema.kind}` : "";
  const length = f.length === "fixed" ? "" : f.length === "rest" ? " to the end" : f.length === "count" ? " after a u32 count" : " after a u16 length";
  const extra = `${f.max !== undefined ? ` at most ${f.max}` : ""}${f.postcard ? ` ${f.postcard}` : ""}${f.entry ? ` of [${f.entry.map(fieldShape).join("][")}]` : ""}`;
  return `${f.type}${length}${schema}${extra}`;
}

export function bodyShape(body: IrBody): string {
  const parts = body.fields.map(fieldShape);
  const tail = body.exact ? "and nothing more" : body.trailing === "ignore" ? "then anything, ignored" : "";
  return `[${parts.join("][")}]${tail ? ` ${tail}` : ""}`;
}

function bodyText(body: IrBody): string {
  const parts = body.fields.map((f) => `${f.name}: ${fieldShape(f)}${f.schema?.kind === "mcp" && f.schema.nullable ? " or null" : ""}`);
  const tail = body.exact ? " and nothing more" : body.trailing === "ignore" ? " then anything, ignored" : "";
  return `[${parts.join("][")}]${tail}`;
}

function compareBody(ba: IrBody, bb: IrBody, what: string, subject: string, tag: number | undefined, A: string, B: string, add: (c: Change) => void, area: ChangeArea): void {
  const base = { area, subject, ...(tag === undefined ? {} : { tag }) };
  if (bodyShape(ba) !== bodyShape(bb)) {
    add({ ...base, class: "forbidden", sentence: `${what} was laid out ${bodyText(ba)} in ${A} and is laid out ${bodyText(bb)} in ${B}; a layout or width never changes in place.` });
    return;
  }
  const names = (b: IrBody) => b.fields.map((f) => f.name).join(", ");
  if (names(ba) !== names(bb)) add({ ...base, class: "breaking", sentence: `${what}: its fields were named ${names(ba)} in ${A} and are named ${names(bb)} in ${B}.` });
  ba.fields.forEach((fa, i) => {
    const fb = bb.fields[i]!;
    const na = fa.schema?.kind === "mcp" && fa.schema.nullable;
    const nb = fb.schema?.kind === "mcp" && fb.schema.nullable;
    if (na && !nb) add({ ...base, class: "breaking", sentence: `${what}: ${fb.name} could be null in ${A} and cannot in ${B}.` });
    if (!na && nb) add({ ...base, class: "additive", sentence: `${what}: ${fb.name} may also be null in ${B}.` });
    if ((fa.invalid ?? "") !== (fb.invalid ?? "")) add({ ...base, class: "breaking", sentence: `${what}: a bad ${fb.name} raised ${fa.invalid} in ${A} and raises ${fb.invalid} in ${B}.` });
    if (fa.doc !== fb.doc) add({ ...base, class: "editorial", sentence: `${what}: the description of ${fb.name} changed.` });
  });
  const raises = (b: IrBody) => `${b.truncated ?? "-"}/${b.exact ?? "-"}/${b.nested?.invalid ?? "-"}/${b.nested?.frameId ?? "-"}`;
  if (raises(ba) !== raises(bb)) add({ ...base, class: "breaking", sentence: `${what}: the errors it raises changed (${raises(ba)} in ${A}, ${raises(bb)} in ${B}).` });
}

/** Items of two lists matched by key, in the order of the first then the new ones of the second. */
function pair<T>(as: readonly T[], bs: readonly T[], key: (t: T) => string): [string, T | undefined, T | undefined][] {
  const bm = new Map(bs.map((t) => [key(t), t]));
  const am = new Map(as.map((t) => [key(t), t]));
  const out: [string, T | undefined, T | undefined][] = as.map((t) => [key(t), t, bm.get(key(t))]);
  for (const t of bs) if (!am.has(key(t))) out.push([key(t), undefined, t]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Output.

export function formatEvolution(e: Evolution): string {
  const lines: string[] = [];
  const count = (c: ChangeClass) => e.changes.filter((x) => x.class === c).length;
  lines.push(`${e.from} → ${e.to}: ${e.changes.length === 0 ? "no changes" : CLASSES.map((c) => `${count(c)} ${c}`).join(", ")}`);
  for (const c of CLASSES) {
    const list = e.changes.filter((x) => x.class === c);
    if (list.length === 0) continue;
    lines.push("", `${c}:`);
    for (const x of list) lines.push(`  ${x.sentence}`);
  }
  for (const p of e.problems) lines.push("", `problem: ${p}`);
  lines.push("");
  if (e.level === "forbidden") lines.push(`FAIL: ${count("forbidden")} forbidden change(s); put each back as it was in ${e.from} and give the new meaning a new tag, kind, frame or error variant.`);
  else if (!e.ok) lines.push(`FAIL: ${e.problems.length} problem(s).`);
  else lines.push(`OK: release as a ${e.bump} bump${e.step && e.step !== e.needs ? ` (the changes need ${e.needs}; the revision step is ${e.step})` : ""}.`);
  return lines.join("\n") + "\n";
}

/** How an exchange is answered, for a sentence: its frame, the frame still pending, or raw bytes. */
function answerOf(x: { readonly answerFrameId: string | undefined; readonly pendingAnswerFrameId?: string; readonly messages: string }): string {
  // A pending frame that a later revision declares is the same frame: not a change of the wire.
  return x.answerFrameId ?? x.pendingAnswerFrameId ?? "raw bytes";
}

/** A standing stream's rule in words, for the diff: when it is first asked and when again. */
function standingOf(x: { readonly standing?: { readonly afterIds: readonly string[]; readonly ended: string } }): string {
  return x.standing ? `asked after ${x.standing.afterIds.join(", ")}, again on ${x.standing.ended}` : "none";
}
