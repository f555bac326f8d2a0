// Which spec revisions the hand-written transports (proxy and provider alike) implement. The codec
// may know more revisions than the transports speak: a revision is added here when the proxy's and
// the provider's behaviour for it is implemented and tested, never earlier.
import { revisions, type Revision } from "@diverge/codec";

/** The revisions both parties' transports speak, oldest first. */
export const SPOKEN_REVISIONS = ["2.3.0"] as const satisfies readonly Revision[];

export type SpokenRevision = (typeof SPOKEN_REVISIONS)[number];

/** A revision was asked for that this build does not speak. */
export class RevisionError extends Error {
  override readonly name = "RevisionError";
  constructor(readonly requested: string) {
    super(
      `revision ${requested} is not spoken here: the transports speak ${SPOKEN_REVISIONS.join(", ")}` +
        (revisions.includes(requested as Revision) ? " (the codec knows it, the transports do not yet)" : ""),
    );
  }
}

/** The revision to speak: `requested` when spoken here, else a RevisionError; by default the newest. */
export function speakRevision(requested?: string): SpokenRevision {
  if (requested === undefined) return SPOKEN_REVISIONS[SPOKEN_REVISIONS.length - 1]!;
  if (!(SPOKEN_REVISIONS as readonly string[]).includes(requested)) throw new RevisionError(requested);
  return requested as SpokenRevision;
}
