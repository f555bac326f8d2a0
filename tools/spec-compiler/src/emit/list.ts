// Lists in a body: `[count: u32][entry]×count`, each entry of fixed integers and u16-prefixed text
// or bytes, every entry's fields checked in order (length, then content) before the next entry.
import type { CodeBlockWriter } from "ts-morph";
import type { IrField } from "../ir.js";
import { INT_SIZE } from "../ir.js";
import { lit } from "../names.js";
import type { ImportSink } from "./postcard.js";

const RUNTIME = "runtime/index.ts";

export function intReader(imports: ImportSink, type: string, at: string): string {
  if (type === "u8") return `bytes[${at}]!`;
  const name = type === "u16" ? "readU16" : type === "u32" ? "readU32" : "readU64";
  return `${imports.value(RUNTIME, name)}(bytes, ${at})`;
}

export function intWriter(imports: ImportSink, type: string, out: string, at: string, expr: string): string {
  if (type === "u8") return `${out}[${at}] = ${expr};`;
  const name = type === "u16" ? "writeU16" : type === "u32" ? "writeU32" : "writeU64";
  return `${imports.value(RUNTIME, name)}(${out}, ${at}, ${expr});`;
}

/** The check of a value to write as an integer field. */
export function intCheck(imports: ImportSink, frameLit: string, field: string, type: string, expr: string): string {
  if (type === "u64") return `${imports.value(RUNTIME, "checkU64")}(${frameLit}, ${lit(field)}, ${expr})`;
  return `${imports.value(RUNTIME, "checkInt")}(${frameLit}, ${lit(field)}, ${lit(type)}, ${expr})`;
}

export function entryType(f: IrField): string {
  return `{ ${f.entry!.map((e) => `${e.name}: ${e.type === "u64" ? "bigint" : e.type === "utf8" ? "string" : e.type === "bytes" ? "Uint8Array" : "number"}`).join("; ")} }[]`;
}

/** Reads the whole list at `$at`, binding `f.name`. */
export function emitListDecode(w: CodeBlockWriter, imports: ImportSink, f: IrField, truncated: string, raise: (variant: string, fields?: string) => string): void {
  w.writeLine(`if ($end - $at < 4) throw ${raise(truncated)};`);
  w.writeLine(`const $${f.name}Count = ${intReader(imports, "u32", "$at")};`);
  w.writeLine("$at += 4;");
  w.writeLine(`const ${f.name}: ${entryType(f)} = [];`);
  w.write(`for (let $i = 0; $i < $${f.name}Count; $i++)`).block(() => {
    for (const e of f.entry!) {
      if (e.length === "fixed") {
        const size = INT_SIZE[e.type as keyof typeof INT_SIZE];
        w.writeLine(`if ($end - $at < ${size}) throw ${raise(truncated)};`);
        w.writeLine(`const ${e.name} = ${intReader(imports, e.type, "$at")};`);
        w.writeLine(`$at += ${size};`);
        if (e.max !== undefined) w.writeLine(`if (${e.name} > ${e.max}) throw ${raise(e.invalid!, `${e.invalidField}: ${e.name}`)};`);
      } else {
        w.writeLine(`if ($end - $at < 2) throw ${raise(truncated)};`);
        w.writeLine(`const $${e.name}End = $at + 2 + ${intReader(imports, "u16", "$at")};`);
        w.writeLine(`if ($${e.name}End > $end) throw ${raise(truncated)};`);
        if (e.type === "utf8") {
          w.writeLine(`const ${e.name} = ${imports.value(RUNTIME, "readUtf8")}(bytes, $at + 2, $${e.name}End);`);
          w.writeLine(`if (${e.name} === undefined) throw ${raise(e.invalid!)};`);
        } else w.writeLine(`const ${e.name} = bytes.subarray($at + 2, $${e.name}End);`);
        w.writeLine(`$at = $${e.name}End;`);
      }
    }
    w.writeLine(`${f.name}.push({ ${f.entry!.map((e) => e.name).join(", ")} });`);
  });
}

/** Encodes every entry into `$<name>Parts`; returns the size term of the list. */
export function emitListPrepare(w: CodeBlockWriter, imports: ImportSink, f: IrField, frameLit: string): string {
  const encodeError = imports.value(RUNTIME, "EncodeError");
  w.writeLine(`const $${f.name}List = value.${f.name} as unknown;`);
  w.writeLine(`if (!Array.isArray($${f.name}List)) throw new ${encodeError}(${frameLit}, ${lit(f.name)}, ${lit(`${f.name} must be an array`)});`);
  w.writeLine(`if ($${f.name}List.length > 0xffffffff) throw new ${encodeError}(${frameLit}, ${lit(f.name)}, ${lit(`${f.name} has more than 4294967295 entries`)});`);
  w.writeLine(`const $${f.name}Parts: Uint8Array[] = [];`);
  w.writeLine(`let $${f.name}Size = 4;`);
  w.write(`for (const $entry of $${f.name}List as Record<string, unknown>[])`).block(() => {
    const sizes: string[] = [];
    for (const e of f.entry!) {
      if (e.length === "fixed") {
        w.writeLine(`const $${e.name} = ${intCheck(imports, frameLit, e.name, e.type, `$entry.${e.name}`)};`);
        sizes.push(String(INT_SIZE[e.type as keyof typeof INT_SIZE]));
      } else {
        const check = e.type === "utf8" ? `${imports.value(RUNTIME, "encodeUtf8")}(${frameLit}, ${lit(e.name)}, $entry.${e.name})` : `${imports.value(RUNTIME, "checkBytes")}(${frameLit}, ${lit(e.name)}, $entry.${e.name})`;
        w.writeLine(`const $${e.name} = ${check};`);
        w.writeLine(`${imports.value(RUNTIME, "checkU16Length")}(${frameLit}, ${lit(e.name)}, $${e.name}.length);`);
        sizes.push("2", `$${e.name}.length`);
      }
    }
    w.writeLine(`const $part = new Uint8Array(${sizes.join(" + ")});`);
    w.writeLine("let $p = 0;");
    for (const e of f.entry!) {
      if (e.length === "fixed") {
        w.writeLine(intWriter(imports, e.type, "$part", "$p", `$${e.name}`));
        w.writeLine(`$p += ${INT_SIZE[e.type as keyof typeof INT_SIZE]};`);
      } else {
        w.writeLine(intWriter(imports, "u16", "$part", "$p", `$${e.name}.length`));
        w.writeLine(`$part.set($${e.name}, $p + 2);`);
        w.writeLine(`$p += 2 + $${e.name}.length;`);
      }
    }
    w.writeLine(`$${f.name}Parts.push($part);`);
    w.writeLine(`$${f.name}Size += $part.length;`);
  });
  return `$${f.name}Size`;
}

export function emitListWrite(w: CodeBlockWriter, imports: ImportSink, f: IrField): void {
  w.writeLine(intWriter(imports, "u32", "$out", "$at", `$${f.name}Parts.length`));
  w.writeLine("$at += 4;");
  w.write(`for (const $part of $${f.name}Parts)`).block(() => {
    w.writeLine("$out.set($part, $at);");
    w.writeLine("$at += $part.length;");
  });
}

export function listLayout(f: IrField): string {
  const entry = f.entry!.map((e) => (e.length === "fixed" ? `[${e.name}: ${e.type === "u8" ? "u8" : `${e.type}, big-endian`}]` : `[${e.name}_len: u16, big-endian][${e.name}: ${e.type === "utf8" ? "UTF-8" : "bytes"}]`)).join("");
  return `[${f.name}_count: u32, big-endian][${f.name}: count × ${entry}]`;
}

export function listArbitrary(f: IrField): string {
  const field = (e: IrField) =>
    e.type === "utf8"
      ? `fc.string({ unit: "binary", maxLength: 12 })`
      : e.type === "bytes"
        ? "fc.uint8Array({ maxLength: 12 })"
        : e.type === "u64"
          ? "fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })"
          : `fc.integer({ min: 0, max: ${e.max ?? (e.type === "u8" ? 0xff : e.type === "u16" ? 0xffff : 0xffffffff)} })`;
  return `fc.array(fc.record({ ${f.entry!.map((e) => `${lit(e.name)}: ${field(e)}`).join(", ")} }), { maxLength: 4 })`;
}
