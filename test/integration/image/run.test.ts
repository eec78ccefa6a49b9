/** A pulled image boots: `smol run --image REGISTRY/REPO:TAG` and a Smolfile `image:` reference (real QEMU). */
import fs from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { layers } from '../../fixtures/images/make-image-tarballs.js';
import { pushImage } from '../../helpers/oci-push.js';
import { hasRegistry, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { killQemuMentioning, scratchHome, smol } from '../../helpers/cli.js';

const why = hasRegistry() ? '' : ' (skipped: /usr/bin/docker-registry is not installed; scripts/setup.sh --test installs it)';

describe.skipIf(!hasRegistry())(`smol run --image REF from a loopback registry${why}`, () => {
  let reg: TestRegistry;
  let home: string;
  let ref: string;
  beforeAll(async () => {
    home = scratchHome('image-run');
    reg = await startRegistry();
    ref = `${reg.host}/smol/boot:v1`;
    await pushImage(reg.host, 'smol/boot', 'v1', [...layers(true), async (d) => {
      await writeFile(path.join(d, 'somefile'), 'pulled over the distribution API\n');
      await mkdir(path.join(d, 'bin'));
      await symlink('busybox', path.join(d, 'bin/cat')); // the fixture has /bin/busybox and /bin/sh only
    }], { format: 'oci', compression: ['gzip', 'zstd', 'none', 'gzip'] });
  });
  afterAll(async () => {
    if (ref) await smol(['image', 'rm', ref], { home });
    killQemuMentioning(home);
    await reg?.stop();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('pulls on first use and boots the pulled content', async () => {
    const r = await smol(['run', '--image', ref, '--', 'cat', '/somefile', '/etc/smol-release'], { home, timeoutMs: 300_000 });
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.stdout).toBe('pulled over the distribution API\nsmol docker fixture\n');
    expect(r.code).toBe(0);
  });

  it('runs a cached reference from a Smolfile with the network off', async () => {
    const f = path.join(home, 'Smolfile');
    fs.writeFileSync(f, `image: ${ref}\n`);
    const r = await smol(['run', '-s', f, '--', 'sh', '-c', 'test -e /keep/a.txt || cat /keep/b.txt'], { home, env: { SMOL_OFFLINE: '1' }, timeoutMs: 300_000 });
    expect(r.stdout).toBe('b\n');
    expect(r.code).toBe(0);
  });
});
