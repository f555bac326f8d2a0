// Which libfuse the FUSE binding loads (issue 36): libfuse 3 where its build loads, libfuse 2.9 when
// DIVERGE_FUSE_LIBFUSE=2 asks for it or libfuse3.so.3 cannot be loaded (hidden here in a private
// mount namespace, bind-mounted over with an empty file), and an error naming the reason when
// DIVERGE_FUSE_LIBFUSE=3 insists and it cannot. Each in a child process, loading the binding afresh.
import { execFile } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

const fuseNativeDir = dirname(createRequire(import.meta.url).resolve("@diverge/fuse-native/package.json"));
const libfuse3 = ["/lib/x86_64-linux-gnu/libfuse3.so.3", "/usr/lib/x86_64-linux-gnu/libfuse3.so.3", "/usr/lib/libfuse3.so.3"].find((file) => existsSync(file));
const built3 = [join(fuseNativeDir, "build", "Release", "fuse3.node"), join(fuseNativeDir, "prebuilds", `${process.platform}-${process.arch}`, "libfuse3", "fuse.node")].some((file) => existsSync(file));
const unavailable = !libfuse3 ? "libfuse3.so.3 is not installed" : !built3 ? "the binding's libfuse 3 build is not made (libfuse3-dev missing at build time)" : process.getuid?.() !== 0 ? "hiding libfuse3.so.3 needs root (a private mount namespace)" : undefined;
if (unavailable) console.log(`FUSE library choice tests skipped: ${unavailable}`);

const PRINT_MAJOR = `try { console.log(JSON.stringify({ major: require(process.argv[1]).LIBFUSE_MAJOR })) } catch (error) { console.log(JSON.stringify({ error: error.message })) }`;

/** What the binding loads in a child: its libfuse major or its error; with libfuse3.so.3 hidden when asked. */
function load(env: Record<string, string | undefined>, hideLibfuse3 = false): Promise<{ major?: number; error?: string }> {
  const node = [process.execPath, "-e", PRINT_MAJOR, fuseNativeDir];
  const [file, args] = hideLibfuse3
    ? ["unshare", ["-m", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', realpathSync(libfuse3!), ...node]]
    : [node[0]!, node.slice(1)];
  const childEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  return new Promise((resolve, reject) =>
    execFile(file as string, args as string[], { env: childEnv, timeout: 120_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${file}: ${stderr || error.message}`)) : resolve(JSON.parse(stdout)))),
  );
}

describe.skipIf(!!unavailable)("the libfuse the FUSE binding loads", () => {
  it("is libfuse 3 by default, libfuse 2.9 with DIVERGE_FUSE_LIBFUSE=2", async () => {
    expect(await load({ DIVERGE_FUSE_LIBFUSE: undefined })).toEqual({ major: 3 });
    expect(await load({ DIVERGE_FUSE_LIBFUSE: "2" })).toEqual({ major: 2 });
    expect(await load({ DIVERGE_FUSE_LIBFUSE: "3" })).toEqual({ major: 3 });
  });

  it("falls back to libfuse 2.9 where libfuse3.so.3 does not load, unless DIVERGE_FUSE_LIBFUSE=3 insists (then the reason)", async () => {
    expect(await load({ DIVERGE_FUSE_LIBFUSE: undefined }, true)).toEqual({ major: 2 });
    const insisted = await load({ DIVERGE_FUSE_LIBFUSE: "3" }, true);
    expect(insisted.major).toBeUndefined();
    expect(insisted.error).toMatch(/^@diverge\/fuse-native: the libfuse 3 binding does not load: .*libfuse3\.so\.3/);
  });
});
