// The swap loop a hostile program runs against a check-then-use by name (tests of every package use it).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const SWAP_LOOP = fileURLToPath(new URL("./swap-loop.py", import.meta.url));

/** Starts exchanging `a` and `b` (renameat2 RENAME_EXCHANGE) in a loop; resolves once it runs. Kill it when done. */
export async function startSwapLoop(a: string, b: string): Promise<ChildProcess> {
  const child = spawn("python3", [SWAP_LOOP, a, b], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.once("error", reject);
    child.stdout!.once("data", () => resolve());
  });
  return child;
}
