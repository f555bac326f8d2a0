// The FUSE mount points this process serves, for the filesystem tree: its walk and its watcher must
// never enter one (a dead or slow provider's mount would hang them). Kept by mountFuse.
const served = new Set<string>();

/** Notes a mount at `path` (an absolute host path) as served by this process, until the returned function is called. */
export function noteServedMount(path: string): () => void {
  served.add(path);
  return () => void served.delete(path);
}

/** The absolute host paths of every FUSE mount this process serves now. */
export function servedMountPoints(): ReadonlySet<string> {
  return served;
}
