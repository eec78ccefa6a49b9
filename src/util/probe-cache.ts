/**
 * Host facts that are slow to probe (a subprocess each) but fixed until something changes, cached under the
 * assets cache as one small JSON file per fact, valid while `key` (a binary's stat, the host's boot id) holds.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { assetsHome, dataPaths } from './paths.js';

export async function cachedProbe<T>(name: string, key: string, probe: () => Promise<T | null>): Promise<T | null> {
  const file = path.join(dataPaths(assetsHome()).cache, 'probes', `${name}.json`);
  try {
    const c = JSON.parse(await readFile(file, 'utf8')) as { key: string; value: T };
    if (c.key === key) return c.value;
  } catch {
    // first probe, or an unreadable cache: probe again
  }
  const value = await probe();
  if (value !== null) {
    const tmp = `${file}.${process.pid}`;
    await mkdir(path.dirname(file), { recursive: true })
      .then(() => writeFile(tmp, JSON.stringify({ key, value })))
      .then(() => rename(tmp, file))
      .catch(() => undefined); // a read-only cache only costs the probe next time
  }
  return value;
}
