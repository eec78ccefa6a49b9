/** What programs expect of /dev and /etc in any Linux (#20.5), on a cold boot and after a snapshot restore. */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchHome, smol } from '../../helpers/cli.js';

let home: string;
beforeAll(() => { home = scratchHome('guest-env'); });
afterAll(() => { fs.rmSync(home, { recursive: true, force: true }); });

const probe = [
  'for f in /dev/fd /dev/stdin /dev/stdout /dev/stderr; do readlink $f; done',
  'echo via-stdout > /dev/stdout',
  'echo via-fd >/dev/fd/1',
  'test -f /dev/stdout && echo REGULAR-FILE',
  'echo "host $(hostname)"',
  'cat /etc/hosts',
].join('; ');

describe('guest /dev and /etc', () => {
  for (const how of ['cold boot', 'snapshot restore']) {
    it(`/dev/fd and /dev/std* are the usual links, /etc/hosts names localhost and the hostname (${how})`, async () => {
      if (how === 'snapshot restore') expect((await smol(['run', '--', 'true'], { home })).code).toBe(0); // saves it
      const r = await smol(['run', ...(how === 'cold boot' ? ['--cold-boot'] : []), '--', 'sh', '-c', probe], { home });
      expect(r.code, r.stderr).toBe(0);
      const out = r.stdout;
      expect(out).toContain('/proc/self/fd\n/proc/self/fd/0\n/proc/self/fd/1\n/proc/self/fd/2\n');
      expect(out).toContain('via-stdout\nvia-fd\n');
      expect(out).not.toContain('REGULAR-FILE');
      const host = /^host (\S+)$/m.exec(out)![1];
      expect(out).toMatch(/^127\.0\.0\.1\s+localhost$/m);
      expect(out).toMatch(new RegExp(`^127\\.0\\.1\\.1\\s+${host}$`, 'm'));
    });
  }

  it('a persistent machine (root disk) gets the same, naming the machine', async () => {
    expect((await smol(['machine', 'create', 'envm'], { home })).code).toBe(0);
    try {
      expect((await smol(['machine', 'start', 'envm'], { home })).code).toBe(0);
      const r = await smol(['machine', 'exec', 'envm', '--', 'sh', '-c', probe], { home });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('/proc/self/fd\n/proc/self/fd/0\n');
      expect(r.stdout).toMatch(/^127\.0\.1\.1\s+envm$/m);
    } finally {
      await smol(['machine', 'rm', '-f', 'envm'], { home });
    }
  });
});
