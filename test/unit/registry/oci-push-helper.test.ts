/**
 * test/helpers/oci-push.ts builds layers in a temp directory it removes in `finally`: every read of that
 * directory must settle before the removal starts. Here `rm` takes effect at once and `readFile` reads a
 * turn later, the order that lost the race in a full run (ENOENT on l.tar).
 */
import { rmSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...real,
    readFile: (async (...a: Parameters<typeof real.readFile>) => {
      await new Promise((r) => setImmediate(r));
      return real.readFile(...a);
    }) as typeof real.readFile,
    rm: (async (p: string, o?: { recursive?: boolean; force?: boolean }) => { rmSync(p, o); }) as typeof real.rm,
  };
});

const { filesLayer, layerBytes } = await import('../../helpers/oci-push.js');

describe('oci-push layerBytes', () => {
  for (const c of ['none', 'zstd', 'gzip'] as const) {
    it(`reads the ${c} layer before its temp directory is removed`, async () => {
      const b = await layerBytes(filesLayer({ 'a.txt': 'hello' }), c);
      expect(b.length).toBeGreaterThan(0);
    });
  }
});
