// The container's program of the filesystem suite (case 9), a process of its own as a program in the
// container is: in one directory (a FUSE mount, or the provider's directory itself for the
// baseline) it writes one large file sequentially, reads another sequentially, and creates small
// files (create + write + close each), timing each part. Prints one JSON line (FsProgramResult).
//
//   node fs-program.js <dir> <write-name> <write-bytes> <read-name> <small-dir> <small-files>
import { mkdir, open, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface FsProgramResult {
  readonly writeBytes: number;
  readonly writeSeconds: number;
  readonly readBytes: number;
  readonly readSeconds: number;
  readonly files: number;
  readonly filesSeconds: number;
}

/** What one write() or read() of the program moves: what `cp` and most programs use. */
const PIECE = 1024 * 1024;

async function main(): Promise<void> {
  const [dir, writeName, writeBytesArg, readName, smallDir, filesArg] = process.argv.slice(2);
  if (!dir || !writeName || !readName || !smallDir) throw new Error("usage: fs-program.js <dir> <write-name> <write-bytes> <read-name> <small-dir> <small-files>");
  const writeBytes = Number(writeBytesArg);
  const files = Number(filesArg);
  const piece = new Uint8Array(PIECE).map((_, i) => (i * 31) & 0xff);

  let start = performance.now();
  const out = await open(join(dir, writeName), "w");
  for (let at = 0; at < writeBytes; at += PIECE) {
    const length = Math.min(PIECE, writeBytes - at);
    let done = 0;
    while (done < length) done += (await out.write(piece, done, length - done)).bytesWritten;
  }
  await out.close();
  const writeSeconds = (performance.now() - start) / 1000;

  start = performance.now();
  const input = await open(join(dir, readName), "r");
  const buffer = new Uint8Array(PIECE);
  let readBytes = 0;
  for (;;) {
    const { bytesRead } = await input.read(buffer, 0, PIECE, null);
    if (bytesRead === 0) break;
    readBytes += bytesRead;
  }
  await input.close();
  const readSeconds = (performance.now() - start) / 1000;

  const small = join(dir, smallDir);
  await mkdir(small);
  const content = "a small file of the program's\n";
  start = performance.now();
  for (let i = 0; i < files; i++) await writeFile(join(small, `f${i}.txt`), content);
  const filesSeconds = (performance.now() - start) / 1000;

  process.stdout.write(`${JSON.stringify({ writeBytes, writeSeconds, readBytes, readSeconds, files, filesSeconds } satisfies FsProgramResult)}\n`);
}

main().catch((problem) => {
  console.error(problem);
  process.exit(1);
});
