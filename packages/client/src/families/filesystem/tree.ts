// Folding filetree frames into a live tree (fs-fuse.md §6.4): a Snapshot replaces the tree,
// Inserted/Modified place a node at its path (replacing a same-named one), Removed deletes a node
// and its subtree; a frame whose parent is absent or not a directory changes nothing.
import type { FiletreeFrame, FiletreeNode } from "@diverge/codec";

export type { FiletreeFrame, FiletreeNode };

/** A path in a {@link LiveTree}: `/`-joined text (as `paths()` gives it) or its components from the root. */
export type TreePath = string | readonly string[];

/** The container's tree as the frames so far describe it. */
export class LiveTree {
  /** The root's entries. */
  children: FiletreeNode[] = [];

  /** Applies one frame; returns whether it changed anything it could place. */
  apply(frame: FiletreeFrame): boolean {
    if (frame.variant === "Snapshot") {
      this.children = frame.children;
      return true;
    }
    const parent = this.entriesAt(frame.path.slice(0, -1));
    if (!parent) return false;
    const name = frame.path[frame.path.length - 1];
    const at = parent.findIndex((node) => node.name === name);
    if (frame.variant === "Removed") {
      if (at < 0) return false;
      parent.splice(at, 1);
      return true;
    }
    if (at >= 0) parent[at] = frame.node;
    else parent.push(frame.node);
    return true;
  }

  /**
   * The node at `path`, or undefined. A path is one type for both methods: the `/`-joined text
   * {@link paths} gives (`"src/main.rs"`), or its components from the root (`["src", "main.rs"]`);
   * a name never holds a `/`, so the two say the same.
   */
  get(path: TreePath): FiletreeNode | undefined {
    const components = typeof path === "string" ? path.split("/").filter((c) => c !== "") : path;
    const parent = this.entriesAt(components.slice(0, -1));
    return parent?.find((node) => node.name === components[components.length - 1]);
  }

  /** Every path in the tree, sorted, `/`-joined: each one {@link get} takes as it is. */
  paths(): string[] {
    const out: string[] = [];
    const walk = (nodes: FiletreeNode[], prefix: string) => {
      for (const node of nodes) {
        out.push(prefix + node.name);
        if (node.variant === "Directory") walk(node.children, `${prefix}${node.name}/`);
      }
    };
    walk(this.children, "");
    return out.sort();
  }

  private entriesAt(path: readonly string[]): FiletreeNode[] | undefined {
    let entries = this.children;
    for (const component of path) {
      const node = entries.find((n) => n.name === component);
      if (!node || node.variant !== "Directory") return undefined;
      entries = node.children;
    }
    return entries;
  }
}

/** Folds a stream of frames: yields the live tree after each frame (the same object, updated). */
export async function* foldTree(frames: AsyncIterable<FiletreeFrame>, tree: LiveTree = new LiveTree()): AsyncGenerator<LiveTree, void, void> {
  for await (const frame of frames) {
    tree.apply(frame);
    yield tree;
  }
}
