// DIVERGE.md as the proxy sends it, typed: the members this project reads, and the rest kept as the file has them.
/**
 * The front matter of `DIVERGE.md`: the members this project reads, typed, and every other member kept
 * as the file has it.
 */
export interface DivergeFrontMatter {
  readonly title?: string;
  readonly summary?: string;
  /** A JSON Schema of what the begin's `arguments` may be. */
  readonly arguments?: Record<string, unknown>;
  /** The names of the secrets the program needs fed before it serves MCP. */
  readonly secrets?: readonly string[];
  readonly [member: string]: unknown;
}

/** The container's `DIVERGE.md`, parsed by the proxy. */
export interface ContainerInfo {
  readonly frontMatter: DivergeFrontMatter;
  /** The front matter exactly as the proxy sent it, including a known member of another type (left out of `frontMatter`). */
  readonly rawFrontMatter: Readonly<Record<string, unknown>>;
  /** The Markdown after the front matter. */
  readonly body: string;
}

/** The proxy's `{frontMatter, body}` read as a ContainerInfo. */
export function typedInfo(info: Record<string, unknown>): ContainerInfo {
  const raw = typeof info.frontMatter === "object" && info.frontMatter !== null && !Array.isArray(info.frontMatter) ? (info.frontMatter as Record<string, unknown>) : {};
  const frontMatter: Record<string, unknown> = { ...raw };
  // A member of a known name but another type is kept out of the typed view; rawFrontMatter has it.
  if (frontMatter.title !== undefined && typeof frontMatter.title !== "string") delete frontMatter.title;
  if (frontMatter.summary !== undefined && typeof frontMatter.summary !== "string") delete frontMatter.summary;
  if (frontMatter.arguments !== undefined && (typeof frontMatter.arguments !== "object" || frontMatter.arguments === null || Array.isArray(frontMatter.arguments))) delete frontMatter.arguments;
  if (frontMatter.secrets !== undefined && !(Array.isArray(frontMatter.secrets) && frontMatter.secrets.every((name) => typeof name === "string"))) delete frontMatter.secrets;
  return { frontMatter: frontMatter as DivergeFrontMatter, rawFrontMatter: raw, body: typeof info.body === "string" ? info.body : "" };
}
