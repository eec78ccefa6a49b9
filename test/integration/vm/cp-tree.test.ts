/** `machine cp -r` copies directories both ways, keeping modes, symlinks and empty directories (#20.8). */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchHome, smol } from '../../helpers/cli.js';

let home: string, src: string;
beforeAll(async () => {
  home = scratchHome('cptree');
  src = path.join(home, 'proj');
  fs.mkdirSync(path.join(src, 'sub', 'deeper'), { recursive: true });
  fs.mkdirSync(path.join(src, 'empty'));
  fs.writeFileSync(path.join(src, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
  fs.writeFileSync(path.join(src, 'sub', 'secret'), 'only me\n', { mode: 0o600 });
  fs.writeFileSync(path.join(src, 'sub', 'deeper', 'big.bin'), Buffer.alloc(3 << 20, 7));
  fs.symlinkSync('sub/secret', path.join(src, 'link'));
  expect((await smol(['machine', 'create', 'cpt'], { home })).code).toBe(0);
  expect((await smol(['machine', 'start', 'cpt'], { home })).code).toBe(0);
});
afterAll(async () => { await smol(['machine', 'rm', '-f', 'cpt'], { home }); fs.rmSync(home, { recursive: true, force: true }); });

/** path -> "type mode [target|size]" for every entry under dir. */
function shape(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const n of fs.readdirSync(path.join(dir, rel)).sort()) {
      const r = rel ? `${rel}/${n}` : n, p = path.join(dir, r), st = fs.lstatSync(p);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) { out[r] = `dir ${mode}`; walk(r); }
      else out[r] = `file ${mode} ${st.size} ${fs.readFileSync(p).subarray(0, 16).toString('hex')}`;
    }
  };
  walk('');
  return out;
}

describe('machine cp -r', () => {
  it('refuses a directory without -r, naming it and the flag', async () => {
    const r = await smol(['machine', 'cp', src, 'cpt:/root/'], { home });
    expect(r.code).toBe(64); // a usage error
    expect(r.stderr).toMatch(/proj is a directory[\s\S]*-r/);
  });

  it('copies a tree in (into an existing directory) and back out (to a new path) unchanged', async () => {
    const into = await smol(['machine', 'cp', '-r', src, 'cpt:/root'], { home });
    expect(into.code, into.stderr).toBe(0);
    const g = await smol(['machine', 'exec', 'cpt', '--', 'sh', '-c', 'cd /root/proj && ./run.sh && readlink link && stat -c "%a %n" sub/secret empty'], { home });
    expect(g.stdout).toBe('ran\nsub/secret\n600 sub/secret\n755 empty\n');
    const back = path.join(home, 'back');
    const out = await smol(['machine', 'cp', '-r', 'cpt:/root/proj', back], { home });
    expect(out.code, out.stderr).toBe(0);
    expect(shape(back)).toEqual(shape(src));
    expect(fs.readdirSync(home).filter((n) => n.includes('smol-part'))).toEqual([]);
  });

  it('a guest directory that does not exist fails and leaves nothing on the host', async () => {
    const dest = path.join(home, 'never');
    const r = await smol(['machine', 'cp', '-r', 'cpt:/nonexistent', dest], { home });
    expect(r.code).not.toBe(0);
    expect(fs.existsSync(dest)).toBe(false);
    expect(fs.readdirSync(home).filter((n) => n.includes('smol-part'))).toEqual([]);
  });
});
