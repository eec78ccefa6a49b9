/**
 * The .smolmachine reader: a whole artifact file (footer, manifest, tar headers, zstd entries) through
 * inspect, verify and extract, as `pack run` meets one pulled from a registry. Inputs are crafted
 * artifacts with lying manifests and members (correct footers, so the deep checks are reached) and
 * byte mutations of them whose footer is re-hashed over the manifest.
 * Properties: only smol's own errors (SmolError) escape; extraction writes nothing outside its target
 * and leaves no temp files when it fails; an artifact verify calls intact extracts (verify must refuse
 * what run refuses).
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { extractArtifact, inspectArtifact, verifyArtifact } from '../../../src/artifact/index.js';
import { FOOTER_SIZE } from '../../../src/artifact/footer.js';
import { contentDigest, FORMAT_VERSION, hostArch, type ArtifactEntry } from '../../../src/artifact/manifest.js';
import { SmolError } from '../../../src/errors/index.js';
import { run as exec } from '../../../src/util/exec.js';
import { craftArtifact, type CraftMember } from '../../unit/artifact/helpers.js';
import { mutated } from '../lib/mutate.js';
import { FuzzFailure, expectOnly, type FuzzTarget } from '../lib/target.js';

/** Mostly undefined: each lie alone, so one check at a time is reached. */
const rarely = <T>(...v: T[]) => fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...v) });
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
let root = '';
const raw: { kernel: Buffer; initrd: Buffer } = { kernel: Buffer.alloc(0), initrd: Buffer.alloc(0) };
const stored: { kernel: Buffer; initrd: Buffer } = { kernel: Buffer.alloc(0), initrd: Buffer.alloc(0) };

async function zstd(data: Buffer): Promise<Buffer> {
  const f = path.join(root, 'z.in');
  await writeFile(f, data);
  await exec('zstd', ['-q', '-f', '--no-progress', f, '-o', `${f}.zst`]);
  return readFile(`${f}.zst`);
}

function entry(kind: 'kernel' | 'initrd', lie: { size: number; stored: number; name?: string; hash: boolean }): ArtifactEntry {
  return {
    name: lie.name ?? kind, kind, format: kind === 'kernel' ? 'elf' : 'cpio',
    size: Math.max(0, raw[kind].length + lie.size), sha256: lie.hash ? sha(raw[kind]) : sha(Buffer.from('x')),
    stored: { compression: 'zstd', size: Math.max(0, stored[kind].length + lie.stored), sha256: sha(stored[kind]) },
  };
}

function manifest(entries: ArtifactEntry[]) {
  return {
    formatVersion: FORMAT_VERSION, smolVersion: '0.1.0', createdAt: '2024-01-01T00:00:00.000Z',
    guest: { platform: 'linux', arch: hostArch() }, kernel: { identity: 'k' }, image: { identity: 'i' },
    resources: { cpus: 1, memoryMiB: 64 }, entries, contentDigest: contentDigest(entries),
  };
}

const lie = fc.record({
  size: fc.constantFrom(0, 0, 0, -1, 1, 4096, 2 ** 40),
  stored: fc.constantFrom(0, 0, 0, -1, 1, 512),
  name: rarely('kernel', 'initrd', 'manifest.json', '..', 'a', 'disk.qcow2'),
  hash: fc.boolean(),
});
const member = fc.record({
  type: fc.constantFrom<CraftMember['type']>('File', 'File', 'File', 'SymbolicLink', 'Link', 'Directory'),
  name: rarely('../kernel.zst', '/kernel.zst', 'x.zst', 'initrd.zst', 'kernel.zst/../a'),
  headerLie: fc.constantFrom(0, 0, 0, 1, -1, 512),
});

const crafted = fc.tuple(lie, lie, member, member, fc.boolean(), fc.constantFrom(0, 0, 1, 2))
  .map(([lk, li, mk, mi, swap, extra]) => {
    const entries = [entry('kernel', lk), entry('initrd', li)];
    const data = [stored.kernel, stored.initrd];
    const members: CraftMember[] = entries.map((e, i) => {
      const m = i === 0 ? mk : mi;
      return { name: m.name ?? `${e.name}.zst`, type: m.type, data: data[i], linkpath: m.type === 'File' ? undefined : '/etc/passwd', headerSize: m.headerLie ? data[i].length + m.headerLie : undefined };
    });
    if (swap) members.reverse();
    for (let i = 0; i < extra; i++) members.push({ name: i ? '../escape' : 'extra.zst', data: Buffer.from('extra') });
    try { return craftArtifact(manifest(entries), members); } catch { return Buffer.alloc(0); }
  });

/** Puts the footer's manifest hash back in agreement with the (mutated) bytes, so parsing goes past it. */
function rehash(b: Buffer): Buffer {
  if (b.length < FOOTER_SIZE + 512) return b;
  const out = Buffer.from(b);
  const f = out.length - FOOTER_SIZE;
  const len = Number(out.readBigUInt64LE(f + 24));
  if (512 + len <= f) createHash('sha256').update(out.subarray(512, 512 + len)).digest().copy(out, f + 32);
  return out;
}

export const artifact: FuzzTarget = {
  name: 'artifact',
  timeoutMs: 20_000,
  async setup() {
    root = await mkdtemp(path.join(os.tmpdir(), 'smol-fuzz-artifact-'));
    raw.kernel = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), Buffer.alloc(3000, 7)]);
    raw.initrd = Buffer.concat([Buffer.from('070701'), Buffer.alloc(1000, 3)]);
    stored.kernel = await zstd(raw.kernel);
    stored.initrd = await zstd(raw.initrd);
  },
  async teardown() { await rm(root, { recursive: true, force: true }); },
  extraSeeds() {
    const ok = { size: 0, stored: 0, hash: true };
    return Promise.resolve([craftArtifact(manifest([entry('kernel', ok), entry('initrd', ok)]), [
      { name: 'kernel.zst', data: stored.kernel }, { name: 'initrd.zst', data: stored.initrd },
    ])]);
  },
  arbitrary: (seeds) => fc.oneof(crafted, fc.tuple(mutated(seeds, { maxEdits: 3, maxLength: 1 << 20 }), fc.boolean()).map(([b, fix]) => (fix ? rehash(b) : b))),
  async run(input) {
    const run = await mkdtemp(path.join(root, 'run-'));
    const file = path.join(run, 'in.smolmachine');
    const outside = path.join(run, 'outside');
    try {
      await mkdir(outside);
      await writeFile(file, input);
      try { await inspectArtifact(file); } catch (err) { expectOnly(err, [SmolError], 'inspectArtifact'); }
      let verified = false;
      try { verified = (await verifyArtifact(file)).ok; } catch (err) { expectOnly(err, [SmolError], 'verifyArtifact'); }
      let refused: unknown;
      try { await extractArtifact(file, path.join(run, 'out', 'm')); } catch (err) { expectOnly(err, [SmolError], 'extractArtifact'); refused = err; }
      const top = (await readdir(run)).sort().join(',');
      if (top !== 'in.smolmachine,out,outside' && top !== 'in.smolmachine,outside') throw new FuzzFailure(`extraction left ${top} beside its target`);
      if ((await readdir(outside)).length) throw new FuzzFailure('extraction wrote outside its target');
      if (refused) {
        const left = await readdir(path.join(run, 'out')).catch(() => []);
        if (left.length) throw new FuzzFailure(`a refused extraction left ${left.join(',')} behind`);
        if (verified) throw new FuzzFailure(`verify called the artifact intact, extract refused it: ${(refused as Error).message}`);
      }
    } finally {
      await rm(run, { recursive: true, force: true });
    }
  },
};
