/**
 * The RAM of a restored run with volumes. virtiofsd reads and writes guest buffers through its own mapping of
 * the guest's RAM, so that RAM must be mapped shared: a private copy of the boot snapshot's template, not the
 * template copy-on-write as other restores map it. The copy is made while QEMU starts instead of before:
 * the file gets its full size first (QEMU maps it at launch and refuses a file smaller than the RAM), then
 * dd fills it in place. A restoring QEMU touches no guest RAM before the device state loads (incoming mode
 * loads no ROMs), so only the restore waits for the copy. Zero blocks are skipped, so RAM the guest never
 * touched stays a hole in /dev/shm (cp --sparse cannot be used: it truncates a file QEMU may be opening).
 */
import fs from 'node:fs';
import { mapFsError, SmolError } from '../../errors/index.js';
import { run } from '../../util/exec.js';

/** Creates dst at its full size now and resolves once it holds src's bytes. */
export function startRamCopy(src: string, dst: string, bytes: number): Promise<void> {
  try {
    fs.writeFileSync(dst, '', { mode: 0o600 });
    fs.truncateSync(dst, bytes);
  } catch (err) {
    fs.rmSync(dst, { force: true });
    return Promise.reject(mapFsError(err, `making the RAM file ${dst}`));
  }
  // 128 KiB blocks: a booted 256 MiB guest's copy takes 8 % more than its 4 KiB-exact size (1 MiB: 14 %), as fast
  return run('dd', [`if=${src}`, `of=${dst}`, 'bs=128K', 'conv=sparse,notrunc', 'status=none']).then(() => undefined, (err: unknown) => {
    fs.rmSync(dst, { force: true });
    throw err instanceof SmolError ? err : mapFsError(err, `copying the RAM template ${src}`);
  });
}
