/** Temporary build directories (`.tmp-*`) are renamed into place when done; a killed build leaves one behind. */
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { STALE_TEMP_MS } from '../limits.js';

/** Remove `.tmp-*` entries in `dir` older than `maxAgeMs` (younger ones may belong to a build in progress). */
export async function sweepStaleTemps(dir: string, maxAgeMs = STALE_TEMP_MS): Promise<number> {
  let removed = 0;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!name.startsWith('.tmp-')) continue;
    const p = path.join(dir, name);
    const st = await stat(p).catch(() => null);
    if (st && Date.now() - st.mtimeMs > maxAgeMs) {
      await rm(p, { recursive: true, force: true });
      removed++;
    }
  }
  return removed;
}
