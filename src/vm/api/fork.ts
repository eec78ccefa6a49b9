/** `smol fork` and `smol snapshot save`: clones of a running machine, and fork points saved to clone from later (listing them: machines.ts). */

/** Clones of a running machine, made from one pause of it (docs/fork.md); `--env` flags for each clone. */
export { forkMachine, type ForkOptions, type ForkResult } from '../fork/fork.js';
export { parseEnvFlags } from '../fork/plan.js';
export type { CloneOutcome } from '../fork/clone.js';
/** A fork point: a machine's memory and disk saved under a name (`smol snapshot save`). */
export { saveForkPoint, type SaveResult } from '../fork/save.js';
/** Clones from a saved fork point (ForkPointPool below keeps some started ahead). */
export { forkFromPoint, type FromPointOptions, type FromPointResult, type PreparedClone } from '../fork/from-point.js';
/**
 * Clones of fork points kept waiting with their QEMU up, for a program that starts one clone per job (a rollout
 * worker): `take` one, `start` it, `release` it when the job is done (removed in the background); `close` at exit.
 */
export { ForkPointPool, type PointPoolOptions } from '../fork/point-pool.js';
