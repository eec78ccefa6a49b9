/**
 * The image layer applier (src/vm/image/layers.ts): a registry-supplied tar, whiteouts included,
 * applied onto a rootfs that already holds a directory, a file and a symlink pointing out of it.
 * Inputs are tars built from node-tar headers with hostile names (`..`, absolute, `.wh..`, paths through
 * the symlink), links, devices and lying sizes, plus byte mutations of them.
 * Properties: only smol's own errors escape; nothing beside the rootfs changes (a sibling directory and
 * the fixed canary directory stay as they were); the rootfs itself stays a directory.
 */
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { Header } from 'tar';
import { applyLayer } from '../../../src/vm/image/layers.js';
import { SmolError } from '../../../src/errors/index.js';
import { mutated } from '../lib/mutate.js';
import { FuzzFailure, expectOnly, type FuzzTarget } from '../lib/target.js';

/** An absolute path a layer's symlink may aim at: it must stay empty whatever the layer says. */
export const CANARY = path.join(os.tmpdir(), 'smol-fuzz-canary');
let root = '';

const NAMES = ['a', 'a/b', 'a/b/c', 'etc/passwd', 'esc', 'esc/pwned', 'esc/x/y', 'lnk', 'lnk/pwned', '..', '../x', 'a/../../x', '/abs',
  '.', './a', '.wh.a', 'a/.wh.b', '.wh..wh..opq', 'a/.wh..wh..opq', 'esc/.wh..wh..opq', '.wh..', 'a/.wh..', '.wh...', 'a/.wh...', 'esc/.wh.sentinel',
  'a\\..\\..\\x', 'outside/x', '../outside/pwned'];
// Absolute targets point only at the canary: a layer that escapes must never reach a real host file.
const TARGETS = ['..', '../outside', '../../', '/', CANARY, `${CANARY}/x`, 'a', 'esc', ''];
type T = 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO';

const entry = fc.record({
  name: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...NAMES) }, { weight: 1, arbitrary: fc.string({ maxLength: 40 }) }),
  type: fc.constantFrom<T>('File', 'File', 'File', 'Directory', 'Directory', 'SymbolicLink', 'SymbolicLink', 'Link', 'CharacterDevice', 'BlockDevice', 'FIFO'),
  link: fc.constantFrom(...TARGETS, ...NAMES),
  data: fc.uint8Array({ maxLength: 700 }),
  mode: fc.constantFrom<number>(0o644, 0o755, 0o4755, 0o6777, 0o1777, 0o000, 0o777),
  sizeLie: fc.constantFrom(0, 0, 0, 0, 1, -1, 1000),
});

type Entry = typeof entry extends fc.Arbitrary<infer E> ? E : never;

function tarOf(entries: Entry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const data = e.type === 'File' ? Buffer.from(e.data) : Buffer.alloc(0);
    let h: Header;
    try {
      h = new Header({ path: e.name, type: e.type, size: Math.max(0, data.length + (e.type === 'File' ? e.sizeLie : 0)), mode: e.mode, mtime: new Date(0), linkpath: e.link, uid: 0, gid: 0, devmaj: 8, devmin: 0 });
      h.encode();
    } catch { continue; }
    parts.push(h.block!, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

const structured = fc.array(entry, { minLength: 1, maxLength: 8 }).map(tarOf);

async function snapshot(dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    for (const n of (await readdir(d).catch(() => [] as string[])).sort()) {
      const p = path.join(d, n);
      const st = await lstat(p);
      out.push(`${rel}${n}:${st.mode.toString(8)}:${st.size}`);
      if (st.isDirectory()) await walk(p, `${rel}${n}/`);
    }
  };
  await walk(dir, '');
  return out.join('\n');
}

export const layers: FuzzTarget = {
  name: 'layers',
  timeoutMs: 10_000,
  async setup() {
    root = await mkdtemp(path.join(os.tmpdir(), 'smol-fuzz-layers-'));
    await rm(CANARY, { recursive: true, force: true });
    await mkdir(CANARY, { recursive: true });
  },
  async teardown() { await rm(root, { recursive: true, force: true }); },
  extraSeeds: () => Promise.resolve([tarOf([
    { name: 'a/b', type: 'File', link: '', data: new Uint8Array([1, 2, 3]), mode: 0o644, sizeLie: 0 },
    { name: 'a/.wh.c', type: 'File', link: '', data: new Uint8Array(), mode: 0o644, sizeLie: 0 },
    { name: 'l', type: 'SymbolicLink', link: `${CANARY}/x`, data: new Uint8Array(), mode: 0o777, sizeLie: 0 },
  ])]),
  arbitrary: (seeds) => fc.oneof(structured, mutated(seeds, { maxEdits: 4, maxLength: 1 << 18 })),
  async run(input) {
    const run = await mkdtemp(path.join(root, 'run-'));
    const rootfs = path.join(run, 'rootfs');
    const outside = path.join(run, 'outside');
    const layer = path.join(run, 'layer.tar');
    try {
      await mkdir(path.join(rootfs, 'a', 'c'), { recursive: true });
      await writeFile(path.join(rootfs, 'etc-file'), 'x');
      await mkdir(outside);
      await writeFile(path.join(outside, 'sentinel'), 'keep');
      await symlink('../outside', path.join(rootfs, 'esc'));
      await symlink(outside, path.join(rootfs, 'lnk'));
      await writeFile(layer, input);
      const before = await snapshot(outside);
      try { await applyLayer(rootfs, layer, 'fuzz'); } catch (err) { expectOnly(err, [SmolError], 'applyLayer'); }
      const top = (await readdir(run)).sort().join(',');
      if (top !== 'layer.tar,outside,rootfs') throw new FuzzFailure(`applying the layer changed the rootfs's parent: ${top}`);
      if (!(await lstat(rootfs)).isDirectory()) throw new FuzzFailure('the rootfs is no longer a directory');
      const after = await snapshot(outside);
      if (after !== before || (await readFile(path.join(outside, 'sentinel'), 'utf8')) !== 'keep') throw new FuzzFailure(`a directory beside the rootfs changed:\n${before}\n->\n${after}`);
      const canary = await readdir(CANARY).catch(() => null);
      if (!canary || canary.length) throw new FuzzFailure(`the canary ${CANARY} was ${canary ? `written (${canary.join(',')})` : 'removed'}`);
    } finally {
      await rm(run, { recursive: true, force: true });
      await mkdir(CANARY, { recursive: true });
    }
  },
};
