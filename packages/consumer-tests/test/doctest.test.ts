// Doctests: every fenced code block of the READMEs, docs-src/*.md and the guide (docs-src/guide/*.md)
// is checked from a consumer's side, against the installed tarballs. TypeScript blocks are compiled
// together (strict, NodeNext, skipLibCheck off); blocks fenced ```ts program are whole programs and
// are run: the guide's container program beside a real `diverge-proxy` (its DIVERGE.md from the
// guide's ```markdown block), then every other program against that proxy. Shell blocks name only
// flags the binaries' own --help lists, and install only packages that exist.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { join, relative } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import ts from "typescript";
import { cleanEnv, typescripts } from "./global-setup.js";
import { publicPackages, workspacePath, workspaceRoot } from "./packages.js";

const { project, tsc } = inject("consumer");

interface Block {
  /** Where it is: `README.md:120`. */
  readonly where: string;
  readonly file: string;
  readonly lang: string;
  readonly flags: readonly string[];
  readonly code: string;
}

/** The Markdown files whose code blocks a consumer copies. */
function documents(): string[] {
  const files = ["README.md"];
  for (const pkg of publicPackages) files.push(join(pkg.dir, "README.md"));
  for (const dir of ["docs-src", "docs-src/guide"]) {
    for (const name of readdirSync(workspacePath(dir)).sort()) if (name.endsWith(".md")) files.push(join(dir, name));
  }
  return files;
}

function blocksOf(file: string): Block[] {
  const lines = readFileSync(workspacePath(file), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j]!)) body.push(lines[j++]!.slice(indent));
    blocks.push({ where: `${file}:${i + 1}`, file, lang: open[2] || "text", flags: open[3]!.split(/\s+/).filter(Boolean), code: body.join("\n") });
    i = j;
  }
  return blocks;
}

const blocks = documents().flatMap(blocksOf);
const tsBlocks = blocks.filter((b) => b.lang === "ts");
const KNOWN = new Set(["ts", "sh", "dockerfile", "markdown", "text", "json"]);
const doctestDir = join(project, "doctest");
const outDir = join(project, "doctest-out");
const fileOf = new Map<Block, string>();

function tsFileName(block: Block, index: number): string {
  return `${block.file.replace(/[^a-z0-9]+/gi, "-").replace(/-md$/i, "")}-${index}.ts`;
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
});

describe("the code blocks of the READMEs and the guide", () => {
  it("are all of a kind this test checks", () => {
    expect(blocks.length).toBeGreaterThan(30);
    expect(blocks.filter((b) => !KNOWN.has(b.lang)).map((b) => `${b.where} (${b.lang})`)).toEqual([]);
    // The guide has its five pages and whole programs to run.
    expect(new Set(blocks.filter((b) => b.file.startsWith("docs-src/guide/")).map((b) => b.file)).size).toBe(5);
    expect(blocks.filter((b) => b.flags.includes("program")).length).toBeGreaterThanOrEqual(3);
  });

  it("are written out, every TypeScript block a module of its own", () => {
    rmSync(doctestDir, { recursive: true, force: true });
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(doctestDir);
    expect(tsBlocks.length).toBeGreaterThan(10);
    tsBlocks.forEach((block, index) => {
      const name = tsFileName(block, index);
      fileOf.set(block, name);
      // `export {}` makes every block a module of its own (top-level await, no shared globals).
      writeFileSync(join(doctestDir, name), `// ${block.where}\n${block.code}\nexport {};\n`);
    });
    writeFileSync(
      join(project, "tsconfig.doctest.json"),
      JSON.stringify({
        compilerOptions: { target: "ES2022", lib: ["ES2022", "DOM"], module: "NodeNext", moduleResolution: "NodeNext", types: ["node"], strict: true, skipLibCheck: false, outDir: "doctest-out", rootDir: "doctest" },
        include: ["doctest/*.ts"],
      }),
    );
  });

  // TypeScript 7 only checks; 5.9 also writes the JavaScript the programs below run.
  for (const version of ["7", "5.9"] as const) {
    it(`compile under TypeScript ${version} (${typescripts[version]}), every TypeScript block, against the installed packages with skipLibCheck off`, () => {
      const result = spawnSync(process.execPath, [tsc[version], "-p", "tsconfig.doctest.json", ...(version === "5.9" ? [] : ["--noEmit"])], { cwd: project, env: cleanEnv(), encoding: "utf8" });
      expect(result.error).toBeUndefined();
      expect((result.stdout + result.stderr).split("\n").filter(Boolean).map(where)).toEqual([]);
      expect(result.status).toBe(0);
    });
  }

  it(`use no global that Node ${process.version} lacks (the DOM library declares more than Node has)`, () => {
    // The blocks are compiled with the DOM library (the MCP SDK's declarations need it), so a
    // browser-only global such as WebSocket on Node 20 type-checks and then throws a ReferenceError.
    // Every value a block takes from the DOM declarations must exist in this Node.
    const config = ts.getParsedCommandLineOfConfigFile(join(project, "tsconfig.doctest.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
    const program = ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, noEmit: true } });
    const checker = program.getTypeChecker();
    const missing: string[] = [];
    for (const source of program.getSourceFiles().filter((file) => file.fileName.startsWith(doctestDir))) {
      const visit = (node: ts.Node): void => {
        if (ts.isIdentifier(node) && !inTypePosition(node)) {
          // A global value: `declare var WebSocket` or `declare function alert` of the DOM library.
          const value = checker.getSymbolAtLocation(node)?.valueDeclaration;
          const global = value !== undefined && (ts.isVariableDeclaration(value) || ts.isFunctionDeclaration(value)) && /lib\.dom\.d\.ts$/.test(value.getSourceFile().fileName);
          if (global && !(node.text in globalThis)) {
            const { line } = source.getLineAndCharacterOfPosition(node.getStart());
            missing.push(where(`doctest/${source.fileName.slice(doctestDir.length + 1)}(${line + 1},1): ${node.text} is not a global of Node ${process.version}`));
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(missing).toEqual([]);
  });

  it("run, the whole programs, against a real proxy beside the guide's container program", async () => {
    const programs = blocks.filter((b) => b.lang === "ts" && b.flags.includes("program"));
    const container = programs.find((b) => /process\.env\.PORT/.test(b.code));
    expect(container, "the guide's container program").toBeDefined();
    const divergeMd = blocks.find((b) => b.lang === "markdown" && b.code.startsWith("---\n") && b.file === container!.file);
    expect(divergeMd, "the guide's DIVERGE.md").toBeDefined();
    const root = join(project, "doctest-root");
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, "DIVERGE.md"), `${divergeMd!.code}\n`);

    const appPort = await freePort();
    const program = start(process.execPath, [join(outDir, fileOf.get(container!)!.replace(/\.ts$/, ".js"))], { PORT: String(appPort) });
    await program.line(/program listening/);
    const proxy = start(join(project, "node_modules", ".bin", "diverge-proxy"), ["--port", "0", "--host", "127.0.0.1", "--program-port", "0", "--pg-port", "0", "--app-port", String(appPort), "--root", root, "--quiet"], {});
    const listening = await proxy.line(/provider ws:\/\/127\.0\.0\.1:(\d+)/);
    const proxyPort = /provider ws:\/\/127\.0\.0\.1:(\d+)/.exec(listening)![1]!;

    for (const block of programs.filter((b) => b !== container)) {
      const file = join(outDir, fileOf.get(block)!.replace(/\.ts$/, ".js"));
      const result = spawnSync(process.execPath, [file], { cwd: project, env: { ...cleanEnv(), DIVERGE_PROXY: `ws://127.0.0.1:${proxyPort}`, API_KEY: "k-1" }, encoding: "utf8", timeout: 60_000 });
      expect({ where: block.where, status: result.status, stderr: result.stderr }).toEqual({ where: block.where, status: 0, stderr: "" });
      if (/openContainer/.test(block.code)) expect(result.stdout, block.where).toContain("Hello, Ada!");
    }
  });

  it("name, in every shell block, only flags the binaries' --help lists and only packages that exist", () => {
    const bins = new Set(publicPackages.flatMap((p) => p.bins));
    const names = new Set(publicPackages.map((p) => p.name));
    const helpOf = new Map<string, string>();
    const help = (bin: string, sub: string[]) => {
      const key = [bin, ...sub].join(" ");
      if (!helpOf.has(key)) {
        const result = spawnSync(join(project, "node_modules", ".bin", bin), [...sub, "--help"], { cwd: project, env: cleanEnv(), encoding: "utf8" });
        helpOf.set(key, result.stdout);
      }
      return helpOf.get(key)!;
    };
    const problems: string[] = [];
    let checked = 0;
    for (const block of blocks.filter((b) => b.lang === "sh" || b.lang === "dockerfile")) {
      for (const raw of block.code.split("\n")) {
        // In a Dockerfile, the proxy's bundle or executable run by path is `diverge-proxy` with its flags.
        const shell = block.lang === "dockerfile" ? (/diverge-proxy(?:\.mjs)?\s+(-[^&"]*)/.exec(raw)?.[1]?.replace(/^/, "diverge-proxy ") ?? "") : raw;
        const line = shell.replace(/\s+#.*$/, "").trim();
        if (!line || line.startsWith("#")) continue;
        for (const segment of line.split(/\||&&/)) {
          const words = segment.trim().match(/'[^']*'|"[^"]*"|\S+/g) ?? [];
          if (words[0] === "npm" && words[1] === "install") {
            for (const name of words.slice(2).filter((w) => w.startsWith("@diverge/"))) if (!names.has(name)) problems.push(`${block.where}: no package ${name}`);
            continue;
          }
          const start = words[0] === "npx" ? 1 : 0;
          const bin = words[start];
          if (!bin || !bins.has(bin)) continue;
          const args = words.slice(start + 1);
          const sub = bin === "diverge" ? args.filter((w) => !w.startsWith("-")).slice(0, 1) : bin === "diverge-spec" ? args.slice(0, 1) : [];
          const text = help(bin, sub);
          for (const flag of args.filter((w) => /^--[a-z]/.test(w)).map((w) => w.split("=")[0]!)) {
            checked++;
            if (!new RegExp(`(^|[\\s[|,])${flag.replace(/-/g, "\\-")}\\b`).test(text)) problems.push(`${block.where}: ${bin} ${sub.join(" ")} has no flag ${flag}`);
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
    expect(problems).toEqual([]);
  });

  it("parse, every JSON block", () => {
    for (const block of blocks.filter((b) => b.lang === "json")) expect(() => JSON.parse(block.code), block.where).not.toThrow();
  });
});

/** Each error names the doctest file; its first line names the README line it came from. */
function where(line: string): string {
  const m = /^doctest\/([^(]+)\((\d+),/.exec(line);
  if (!m) return line;
  const block = tsBlocks.find((b) => fileOf.get(b) === m[1]);
  return block ? `${block.file}:${Number(block.where.split(":")[1]) + Number(m[2]) - 1}: ${line}` : line;
}

/** A name in a type (`let s: WebSocket`) needs no value at run time. */
function inTypePosition(node: ts.Node): boolean {
  for (let at: ts.Node | undefined = node.parent; at; at = at.parent) {
    if (ts.isTypeNode(at) || ts.isImportTypeNode(at) || ts.isTypeAliasDeclaration(at) || ts.isInterfaceDeclaration(at)) return true;
    if (ts.isBlock(at) || ts.isSourceFile(at)) return false;
  }
  return false;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts a long-running child; `line(re)` resolves with the first line of its output matching. */
function start(command: string, args: string[], env: Record<string, string>): { line(pattern: RegExp): Promise<string> } {
  const child = spawn(command, args, { cwd: project, env: { ...cleanEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  const waiters: (() => void)[] = [];
  const take = (chunk: Buffer) => {
    output += chunk.toString();
    for (const wake of waiters.splice(0)) wake();
  };
  child.stdout!.on("data", take);
  child.stderr!.on("data", take);
  return {
    async line(pattern) {
      const deadline = Date.now() + 90_000;
      for (;;) {
        const found = output.split("\n").find((l) => pattern.test(l));
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${relative(workspaceRoot, command)} never printed ${pattern}:\n${output}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
  };
}

