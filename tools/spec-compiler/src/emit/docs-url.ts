// The docs URL scheme, in one place. Every page of the reference has a stable path derived only from
// spec ids, so a link written today still works when a later revision is added beside it:
//
//   /                                                    every revision
//   /<rev>/                                              the revision's index
//   /<rev>/mcp-types/                                    the MCP types frames name
//   /<rev>/<group id>/                                   an exchange group, e.g. /2.3.0/proxy/mcp/, or a
//                                                        group of paths the provider opens, e.g.
//                                                        /2.3.0/provider/tool/
//   /<rev>/<group id>/<exchange slug>/                   an exchange: its id less the group's last
//                                                        segment, e.g. /2.3.0/proxy/mcp/list-tools/
//   /<rev>/container-proxy-endpoints/                    every frame and error type
//   /<rev>/container-proxy-endpoints/<frame id>/         a frame, e.g. …/tools-begin/client/channel-request/
//   /<rev>/container-proxy-endpoints/<family id>/        a frame declared for both directions
//   /<rev>/container-proxy-endpoints/<error type id>/    an error type
//   /<rev>/container-proxy-endpoints/<channel table id>/ a channel table
//   /<rev>/container-proxy-endpoints/<frame folder>/<variant slug>/<role>/
//                                                        a variant of a tagged frame: the frame id's
//                                                        folder, the variant name in kebab case (or the
//                                                        variant's `path` in the spec), and the last word
//                                                        of the frame id, e.g.
//                                                        …/tools-begin/client/postgres/request/
import type { IrExchange, IrExchangeGroup, IrFrame, IrVariant } from "../ir.js";

export const FRAMES_SECTION = "container-proxy-endpoints";

export type DocTarget =
  | { readonly kind: "home" }
  | { readonly kind: "revision"; readonly revision: string }
  | { readonly kind: "mcpTypes"; readonly revision: string }
  | { readonly kind: "frames"; readonly revision: string }
  | { readonly kind: "frame"; readonly revision: string; readonly frameId: string }
  | { readonly kind: "family"; readonly revision: string; readonly familyId: string }
  | { readonly kind: "errorType"; readonly revision: string; readonly errorTypeId: string }
  | { readonly kind: "channelTable"; readonly revision: string; readonly channelTableId: string }
  | { readonly kind: "variant"; readonly revision: string; readonly frame: IrFrame; readonly variant: IrVariant }
  | { readonly kind: "group"; readonly revision: string; readonly groupId: string }
  | { readonly kind: "pathGroup"; readonly revision: string; readonly groupId: string }
  | { readonly kind: "exchange"; readonly revision: string; readonly group: IrExchangeGroup | undefined; readonly exchange: IrExchange };

/** The site path of a page: absolute, always ending in `/`. */
export function docsUrl(t: DocTarget): string {
  switch (t.kind) {
    case "home":
      return "/";
    case "revision":
      return `/${t.revision}/`;
    case "mcpTypes":
      return `/${t.revision}/mcp-types/`;
    case "frames":
      return `/${t.revision}/${FRAMES_SECTION}/`;
    case "frame":
      return `/${t.revision}/${FRAMES_SECTION}/${t.frameId}/`;
    case "family":
      return `/${t.revision}/${FRAMES_SECTION}/${t.familyId}/`;
    case "errorType":
      return `/${t.revision}/${FRAMES_SECTION}/${t.errorTypeId}/`;
    case "channelTable":
      return `/${t.revision}/${FRAMES_SECTION}/${t.channelTableId}/`;
    case "variant": {
      const parts = t.frame.id.split("/");
      const base = parts.pop()!;
      const folder = parts.length > 0 ? `${parts.join("/")}/` : "";
      const role = base.split("-").pop()!;
      const own = t.variant.path ?? `${kebab(t.variant.name)}/${role}`;
      return `/${t.revision}/${FRAMES_SECTION}/${folder}${own}/`;
    }
    case "group":
    case "pathGroup":
      return `/${t.revision}/${t.groupId}/`;
    case "exchange": {
      if (!t.group) return `/${t.revision}/exchanges/${t.exchange.id}/`;
      const prefix = `${t.group.id.split("/").pop()!}-`;
      const slug = t.exchange.id.startsWith(prefix) ? t.exchange.id.slice(prefix.length) : t.exchange.id;
      return `/${t.revision}/${t.group.id}/${slug}/`;
    }
  }
}

/** `McpListTools` → `mcp-list-tools`. */
export function kebab(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/([A-Z])([A-Z][a-z])/g, "$1-$2")
    .toLowerCase();
}

/** A link from one page to another (both site paths ending in `/`), relative, to the target's folder. */
export function relativeUrl(from: string, to: string): string {
  const a = from.split("/").filter(Boolean);
  const b = to.split("/").filter(Boolean);
  let common = 0;
  while (common < a.length && common < b.length && a[common] === b[common]) common++;
  const rel = "../".repeat(a.length - common) + b.slice(common).map((p) => `${p}/`).join("");
  return rel === "" ? "./" : rel;
}

/** The anchor GitHub and the site give a heading: lower case, punctuation dropped, spaces as dashes. */
export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}
