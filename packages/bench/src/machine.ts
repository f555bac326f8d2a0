// The machine a run measured, recorded with its results: ratios from another machine are not these.
import { cpus, freemem, loadavg, totalmem, platform, release, arch } from "node:os";

export interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly freeMemoryGiB: number;
  readonly node: string;
  readonly v8: string;
  readonly os: string;
  readonly date: string;
  /** The 1-, 5- and 15-minute load averages when the run started: other work on the machine. */
  readonly loadAverage: readonly number[];
}

export function machine(): Machine {
  const list = cpus();
  return {
    cpu: list[0]?.model.trim() ?? "unknown",
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeMemoryGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
    node: process.version,
    v8: process.versions.v8,
    os: `${platform()} ${release()} ${arch()}`,
    date: new Date().toISOString(),
    loadAverage: loadavg().map((n) => Math.round(n * 100) / 100),
  };
}
