/**
 * Every qemu-img run vm makes, so the tool's flags are known in one place. (src/artifact/disk.ts runs its own
 * `info` and `convert`: artifact sits below vm and cannot import it.)
 */
import { mapFsError } from '../../errors/index.js';
import { run } from '../../util/exec.js';
import { QEMU_IMG } from './detect.js';

/**
 * A qcow2 overlay at `out` over the qcow2 file `backing`; without `sizeBytes` it is as large as the backing.
 * `unsafe` (-u) skips opening the backing file: it may still be open in a running QEMU, and a size must be given.
 */
export async function createOverlayFile(backing: string, out: string, opts: { sizeBytes?: number; unsafe?: boolean } = {}): Promise<void> {
  const args = ['create', '-q', '-f', 'qcow2', ...(opts.unsafe ? ['-u'] : []), '-b', backing, '-F', 'qcow2', out];
  if (opts.sizeBytes !== undefined) args.push(String(opts.sizeBytes));
  await run(QEMU_IMG, args).catch((e) => { throw mapFsError(e, `creating overlay ${out}`); });
}

/**
 * A safe rebase of the qcow2 overlay `file` onto `backing` (or onto nothing, making it standalone): every
 * cluster that differs between the old chain and the new one is copied into `file`. Errors come back unmapped.
 */
export async function rebase(file: string, backing: string | null): Promise<void> {
  await run(QEMU_IMG, ['rebase', '-q', '-f', 'qcow2', ...(backing ? ['-b', backing, '-F', 'qcow2'] : ['-b', '']), file]);
}

/** The raw image `raw` written out as the qcow2 file `out`. Errors come back unmapped. */
export async function convertRawToQcow2(raw: string, out: string): Promise<void> {
  await run(QEMU_IMG, ['convert', '-q', '-f', 'raw', '-O', 'qcow2', raw, out]);
}
