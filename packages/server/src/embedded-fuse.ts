// The FUSE package a bundle carries inside itself. The workspace build and the installed package
// carry none (the binding is found in node_modules, natives.ts); scripts/bundle.mjs replaces this
// module with one holding @diverge/fuse-native's JavaScript and its .node binary, so a bundle
// copied alone into an image mounts as the workspace build does (families/fuse/mount.ts).

/** fuse-native's class and its loaded binding, from inside the bundle. */
export interface EmbeddedFuse {
  readonly Fuse: unknown;
  readonly binding: unknown;
}

/** Loads the carried binding (once); undefined where nothing is carried. Throws with the reason it cannot load. */
export const embeddedFuse: (() => EmbeddedFuse) | undefined = undefined;
