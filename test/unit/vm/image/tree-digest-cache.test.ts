import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { treeDigest } from '../../../../src/vm/image/digest.js';
import { cachedTreeDigest, speculativeTreeDigest } from '../../../../src/vm/image/tree-digest-cache.js';
import { earlyFingerprint, startEarlyFingerprint, treeFingerprint } from '../../../../src/vm/image/tree-fingerprint.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-tdc-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const tree = path.join(tmp, 'rootfs'), cache = path.join(tmp, 'cache', 'tree-digests.json');
fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
fs.writeFileSync(path.join(tree, 'etc', 'conf'), 'aaaa');
fs.symlinkSync('etc/conf', path.join(tree, 'link'));

describe('tree digests cached by stat fingerprint', () => {
  it('equals the content digest, and a second call is answered from the cache', async () => {
    const d = await cachedTreeDigest(tree, cache);
    expect(d).toBe(await treeDigest(tree));
    // prove the hit path: an unchanged tree gets whatever the cache holds for it
    const all = JSON.parse(fs.readFileSync(cache, 'utf8'));
    all[tree].content = 'from-the-cache';
    fs.writeFileSync(cache, JSON.stringify(all));
    expect(await cachedTreeDigest(tree, cache)).toBe('from-the-cache');
  });

  it('sees a same-size edit whose mtime was put back (ctime moved)', async () => {
    const f = path.join(tree, 'etc', 'conf');
    const st = fs.statSync(f);
    fs.writeFileSync(f, 'bbbb');
    fs.utimesSync(f, st.atime, st.mtime);
    const d = await cachedTreeDigest(tree, cache);
    expect(d).not.toBe('from-the-cache');
    expect(d).toBe(await treeDigest(tree));
  });

  it('sees an added file, a mode change and a retargeted link', async () => {
    for (const change of [
      () => fs.writeFileSync(path.join(tree, 'new'), ''),
      () => fs.chmodSync(path.join(tree, 'etc', 'conf'), 0o600),
      () => { fs.unlinkSync(path.join(tree, 'link')); fs.symlinkSync('new', path.join(tree, 'link')); },
    ]) {
      const before = await cachedTreeDigest(tree, cache);
      change();
      const after = await cachedTreeDigest(tree, cache);
      expect(after).not.toBe(before);
      expect(after).toBe(await treeDigest(tree));
    }
  });
});

describe('tree fingerprints (GNU find listings)', () => {
  it('are stable for an unchanged tree, null for a missing one, and see a rename and a name with a newline', async () => {
    const before = await treeFingerprint(tree);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    expect(await treeFingerprint(tree)).toBe(before);
    expect(await treeFingerprint(path.join(tmp, 'no-such-dir'))).toBeNull();
    fs.renameSync(path.join(tree, 'etc', 'conf'), path.join(tree, 'etc', 'conf\nx'));
    const renamed = await treeFingerprint(tree);
    expect(renamed).not.toBe(before);
    // back again is still a change: the rename moved the file's ctime and the directory's mtime
    fs.renameSync(path.join(tree, 'etc', 'conf\nx'), path.join(tree, 'etc', 'conf'));
    expect(await treeFingerprint(tree)).not.toBe(before);
  });

  it('follows a symlink given as the tree itself', async () => {
    const link = path.join(tmp, 'tree-link');
    fs.symlinkSync(tree, link);
    expect(await treeFingerprint(link)).not.toBeNull();
    expect(await treeFingerprint(link)).not.toBe(await treeFingerprint(path.join(tmp, 'no-such-dir')));
  });

  it('an early listing is handed out once', async () => {
    startEarlyFingerprint(tree);
    const p = earlyFingerprint(tree);
    expect(p).toBeDefined();
    expect(await p).toBe(await treeFingerprint(tree));
    expect(earlyFingerprint(tree)).toBeUndefined();
  });
});

describe('speculative tree digests', () => {
  it('answers null for a tree never hashed', async () => {
    const other = path.join(tmp, 'never');
    fs.mkdirSync(other);
    expect(await speculativeTreeDigest(other, cache)).toBeNull();
  });

  it('gives the last digest at once, confirmed while the tree is unchanged and refuted after a change', async () => {
    const digest = await cachedTreeDigest(tree, cache);
    const ok = await speculativeTreeDigest(tree, cache);
    expect(ok?.content).toBe(digest);
    expect(await ok!.confirm()).toBe(true);
    const stale = await speculativeTreeDigest(tree, cache);
    fs.writeFileSync(path.join(tree, 'etc', 'conf'), 'cccc');
    expect(stale?.content).toBe(digest);
    expect(await stale!.confirm()).toBe(false);
    // the full path then hashes the new content
    expect(await cachedTreeDigest(tree, cache)).toBe(await treeDigest(tree));
  });
});
