import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sweepStaleTemps } from '../../../../src/vm/image/tmp.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'sweep-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sweepStaleTemps', () => {
  it('removes old build leftovers only, sparing young ones and finished entries', async () => {
    for (const n of ['.tmp-old', '.tmp-young', 'done-image', 'old-but-not-tmp']) mkdirSync(path.join(dir, n));
    const hourAgo = (Date.now() - 3600_000) / 1000;
    utimesSync(path.join(dir, '.tmp-old'), hourAgo, hourAgo);
    utimesSync(path.join(dir, 'old-but-not-tmp'), hourAgo, hourAgo);
    expect(await sweepStaleTemps(dir)).toBe(1);
    expect(existsSync(path.join(dir, '.tmp-old'))).toBe(false);
    for (const n of ['.tmp-young', 'done-image', 'old-but-not-tmp']) expect(existsSync(path.join(dir, n))).toBe(true);
    expect(await sweepStaleTemps(path.join(dir, 'missing'))).toBe(0);
  });
});
