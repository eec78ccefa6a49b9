/**
 * Running commands in and copying files to and from a machine that exists. Its own door because exec loads the
 * CUDA daemon (for `--gpu`), which `machine ls` and the other listing commands never need.
 */

/** A command in a running machine (`machine exec`/`shell`), its exit status, and the same on an open channel. */
export { execInMachine, execOnChannel, exitCodeOf, type ExecIo, type ExecResult } from '../exec.js';
/** `smol machine cp`: one end may be `MACHINE:PATH`; the defaults (api/limits.ts) bound what a guest can make the host write or wait for. */
export { copy, parseCopyEnd, type CopyEnd, type CopyOptions } from '../exec.js';
/** An untrusted tar stream written into a fresh host directory under `machine cp`'s rules (the API's tar uploads). */
export { extractUntrusted, type ExtractStats } from '../copy-extract.js';
/** `machine exec -d`: a command left running in the guest, its output in a guest log file. */
export { execDetached, type DetachedExec } from '../exec-detached.js';
/** A Smolfile's `secrets:` read from the host environment, to be sent to the guest and never stored. */
export { resolveSecrets, type ResolvedSecrets } from '../secrets.js';
export type { ExecHandle, ExecRequest, GuestChannel } from '../engine.js';
