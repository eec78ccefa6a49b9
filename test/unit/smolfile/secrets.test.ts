import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NotFoundError, SmolError, ValidationError } from '../../../src/errors/index.js';
import { parseSmolfile } from '../../../src/smolfile/load.js';
import { mergeSpec } from '../../../src/smolfile/merge.js';
import { secretFlagsSchema } from '../../../src/smolfile/secrets.js';
import { holdsSecrets } from '../../../src/vm/store/machines.js';
import { resolveSecrets } from '../../../src/vm/secrets.js';

const catchErr = (f: () => unknown) => { try { f(); } catch (e) { return e as SmolError; } throw new Error('did not throw'); };

describe('secret declarations', () => {
  it('flags become names and absolute host paths, never values', () => {
    const d = secretFlagsSchema('/work').parse({ secretEnv: ['TOKEN', 'TOKEN', 'B'], secretFile: ['key=./k.pem', 'ca=/etc/ca.pem'] });
    expect(d).toEqual({ env: ['TOKEN', 'B'], files: { key: '/work/./k.pem', ca: '/etc/ca.pem' } });
  });

  it('rejects names that are not env names or safe file names', () => {
    expect(secretFlagsSchema('/').safeParse({ secretEnv: ['1X'] }).success).toBe(false);
    for (const f of ['../x=/p', '.=/p', 'a/b=/p', 'nopath', 'k=']) expect(secretFlagsSchema('/').safeParse({ secretFile: [f] }).success, f).toBe(false);
  });

  it('a Smolfile names secrets; file paths resolve against the Smolfile; flags add to them', () => {
    const sf = parseSmolfile('secrets:\n  env: [API_TOKEN]\n  files: {tls: ./key.pem}\n');
    const spec = mergeSpec(sf, '/srv/app', { secrets: { env: ['OTHER'], files: { ca: '/ca.pem' } } });
    expect(spec.secrets).toEqual({ env: ['API_TOKEN', 'OTHER'], files: { tls: '/srv/app/key.pem', ca: '/ca.pem' } });
    expect((catchErr(() => parseSmolfile('secrets:\n  env: [A]\n  value: x\n')) as ValidationError).issues[0].message).toMatch(/unknown key "value"/);
    expect(mergeSpec(undefined, undefined, {}).secrets).toBeUndefined();
  });
});

describe('resolving secrets', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-secrets-'));
  const file = path.join(dir, 'key');
  fs.writeFileSync(file, 'marker-value');

  it('reads env values and file contents from the host at the time of delivery', () => {
    const r = resolveSecrets({ env: ['TOKEN'], files: { key: file } }, { TOKEN: 's3cret' });
    expect(r.env).toEqual({ TOKEN: 's3cret' });
    expect(r.files.map((f) => [f.name, f.data.toString()])).toEqual([['key', 'marker-value']]);
  });

  it('a missing variable or file is not found (66) and names the flag; a directory is invalid input (65)', () => {
    const e = catchErr(() => resolveSecrets({ env: ['NOPE'], files: {} }, {}));
    expect(e).toBeInstanceOf(NotFoundError);
    expect(e.message).toMatch(/NOPE is not set/);
    expect(e.exitCode).toBe(66);
    expect(catchErr(() => resolveSecrets({ env: [], files: { k: path.join(dir, 'missing') } })).exitCode).toBe(66);
    const d = catchErr(() => resolveSecrets({ env: [], files: { k: dir } }));
    expect([d.exitCode, d.where]).toEqual([65, `--secret-file k=${dir}`]);
  });

  it('errors never carry the value', () => {
    const e = catchErr(() => resolveSecrets({ env: ['A', 'B'], files: {} }, { A: 'marker-value' }));
    expect(JSON.stringify({ m: e.message, w: e.where, h: e.hint })).not.toContain('marker-value');
  });

  it('a machine holds secrets in RAM from a delivery until it starts again', () => {
    expect(holdsSecrets({ secretsAt: null, startedAt: 10 })).toBe(false);
    expect(holdsSecrets({ secretsAt: 12, startedAt: 10 })).toBe(true);
    expect(holdsSecrets({ secretsAt: 12, startedAt: 20 })).toBe(false);
  });
});
