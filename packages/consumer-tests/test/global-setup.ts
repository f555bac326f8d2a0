// Runs once before every test file: packs each public package with pnpm (as a release would) and
// installs the tarballs with npm into a fresh project under the OS temp folder, outside the
// workspace, so nothing resolves through the monorepo's node_modules or its symlinks.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { packageRoot, publicPackages, tarballName, workspacePath } from "./packages.js";

/**
 * The TypeScripts a consumer's code is checked with: the project's own (5.9, what the workspace
 * builds with) and the one `npm i -D typescript` installs now (7, the native compiler), installed in
 * a project of its own beside the consumer's so each keeps its `tsc`.
 */
export const typescripts = { "5.9": "typescript@5.9.3", "7": "typescript@7.0.2" } as const;
export type TypeScriptVersion = keyof typeof typescripts;

/** Exact versions of what the consumer adds beside our tarballs. */
// postject: what `diverge-proxy bundle` makes the single executable with (an optional peer of @diverge/server).
// ws and @types/ws: what the multiplexer README's example opens its WebSocket with (Node 20 has no global one).
export const consumerExtras = ["@modelcontextprotocol/sdk@1.32.2", typescripts["5.9"], "@types/node@20.19.9", "postject@1.0.0-alpha.6", "ws@8.23.0", "@types/ws@8.18.2"];

declare module "vitest" {
  export interface ProvidedContext {
    consumer: {
      /** The temporary consumer project, with the tarballs installed. */
      project: string;
      /** Package name → absolute path of its tarball. */
      tarballs: Record<string, string>;
      /** TypeScript version → the absolute path of its `tsc` (run with Node). */
      tsc: Record<TypeScriptVersion, string>;
    };
  }
}

/** The environment without pnpm's and turbo's npm_* settings, which would steer a nested npm. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key)) env[key] = value;
  return env;
}

function run(command: string, args: readonly string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, env: cleanEnv(), encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} (in ${cwd}) failed with ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

export default function setup(project: TestProject): () => void {
  const root = mkdtempSync(join(tmpdir(), "diverge-consumer-"));
  const packs = join(root, "tarballs");
  const consumer = join(root, "project");
  mkdirSync(packs);
  mkdirSync(consumer);

  const tarballs: Record<string, string> = {};
  for (const pkg of publicPackages) {
    const dir = workspacePath(pkg.dir);
    const built = pkg.kind === "native" ? join("prebuilds", `${process.platform}-${process.arch}`, "node.napi.node") : "dist";
    if (!existsSync(join(dir, built))) throw new Error(`${pkg.name} is not built (no ${pkg.dir}/${built}): run \`pnpm build\` first`);
    run("pnpm", ["pack", "--pack-destination", packs], dir);
    const tarball = join(packs, tarballName(pkg.name, pkg.version));
    if (!existsSync(tarball)) throw new Error(`pnpm pack of ${pkg.name} wrote no ${tarball}`);
    tarballs[pkg.name] = tarball;
  }

  // The consumer's own files (TypeScript checks, the Node script, the browser page) live in
  // project/ of this package; a real consumer would write the same.
  cpSync(join(packageRoot, "project"), consumer, { recursive: true });
  writeFileSync(join(consumer, "package.json"), `${JSON.stringify({ name: "diverge-consumer", version: "0.0.0", private: true, type: "module" }, null, 2)}\n`);
  run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", ...Object.values(tarballs), ...consumerExtras], consumer);

  // TypeScript 7 in a project of its own: it compiles the consumer's files, whose imports resolve
  // from the consumer's node_modules as they would under the project's own tsc.
  const typescript7 = join(root, "typescript-7");
  mkdirSync(typescript7);
  writeFileSync(join(typescript7, "package.json"), `${JSON.stringify({ name: "typescript-7", version: "0.0.0", private: true }, null, 2)}\n`);
  run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", typescripts["7"]], typescript7);
  const tsc = { "5.9": join(consumer, "node_modules", "typescript", "bin", "tsc"), "7": join(typescript7, "node_modules", "typescript", "bin", "tsc") };

  project.provide("consumer", { project: consumer, tarballs, tsc });
  return () => {
    if (!process.env.DIVERGE_KEEP_CONSUMER) rmSync(root, { recursive: true, force: true });
    else process.stdout.write(`consumer project kept at ${consumer}\n`);
  };
}
