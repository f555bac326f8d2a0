// The bracket notation of a frame's bytes, e.g. `[0][connection_id: u32, big-endian]`, shared by the
// codec's TSDoc and the reference docs so that both show the same layout.
import type { IrBody, IrFrame, IrVariant } from "../ir.js";
import { shapeLayout } from "./postcard.js";
import { listLayout } from "./list.js";

/** Every layout of a frame: its body's, or one line per variant of a tagged frame. */
export function layoutOf(frame: IrFrame): string {
  if (frame.postcard) return shapeLayout(frame.postcard);
  if (frame.body) return bodyLayout(frame.body);
  return frame.switch!.variants.map((v) => variantLayout(frame, v)).join("\n");
}

/** One variant's bytes: the header with the tag written as its value, then the variant's body. */
export function variantLayout(frame: IrFrame, v: IrVariant): string {
  const head = frame.header!.fields.map((f) => (f.name === frame.switch!.on ? `[${v.tag}]` : `[${f.name}: ${intText(f.type)}]`)).join("");
  return head + bodyLayout(v.body);
}

/** A tagged frame's header with the tag named rather than valued, then what follows it. */
export function headerLayout(frame: IrFrame): string {
  return frame.header!.fields.map((f) => `[${f.name}: ${intText(f.type)}]`).join("") + "[payload …]";
}

export function bodyLayout(body: IrBody): string {
  const parts = body.fields.map((f) => {
    if (f.length === "fixed") return `[${f.name}: ${intText(f.type)}]`;
    if (f.length === "u16") return `[${f.name}_len: u16, big-endian][${f.name}: ${f.type === "utf8" ? "UTF-8" : "bytes"}]`;
    if (f.type === "json") return `[${f.name}: JSON …]`;
    if (f.type === "postcard") return `[${f.name}: postcard ${f.postcard} …]`;
    if (f.type === "list") return listLayout(f);
    return `[${f.name}: ${f.type === "utf8" ? "UTF-8" : "bytes"} …]`;
  });
  return parts.join("") + (body.trailing === "ignore" ? "[ignored …]" : "");
}

export function intText(type: string): string {
  return type === "u8" ? "u8" : `${type}, big-endian`;
}
