import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactError, ExitCode } from '../../../src/errors/index.js';
import { extractArtifact, generateKeyPair, packArtifact, verifyArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { FOOTER_SIZE } from '../../../src/artifact/footer.js';
import { makeInputs, tempDir, type Inputs } from './helpers.js';
import { ciOrLong, longTests } from '../../helpers/long.js';

/** Layout of a packed artifact, from the spec: header 512, data padded to 512, per member; then 1024 zero bytes and the footer. */
function regions(m: ArtifactManifest, manifestLength: number) {
  let off = 512 + Math.ceil(manifestLength / 512) * 512;
  return m.entries.map((e) => {
    const r = { name: e.name, header: off, data: off + 512, size: e.stored.size };
    off += 512 + Math.ceil(e.stored.size / 512) * 512;
    return r;
  });
}

describe('verifyArtifact', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let inputs: Inputs;
  let keys: { privateKey: string; publicKey: string; keyId: string };
  let other: { privateKey: string; publicKey: string; keyId: string };
  let signed: string;
  let plain: string;
  let manifest: ArtifactManifest;
  let original: Buffer;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    inputs = await makeInputs(dir, { disk: true });
    keys = await generateKeyPair(path.join(dir, 'k'));
    other = await generateKeyPair(path.join(dir, 'other'));
    signed = path.join(dir, 'signed.smolmachine');
    plain = path.join(dir, 'plain.smolmachine');
    manifest = (await packArtifact({ ...inputs, out: signed, signKey: keys.privateKey, createdAt: '2026-01-01T00:00:00Z' })).manifest;
    await packArtifact({ ...inputs, out: plain, createdAt: '2026-01-01T00:00:00Z' });
    original = await readFile(signed);
  });
  afterAll(() => cleanup());

  const tampered = async (offset: number): Promise<string> => {
    const b = Buffer.from(original);
    b[offset] ^= 0x01;
    const f = path.join(dir, `t-${offset}.smolmachine`);
    await writeFile(f, b);
    return f;
  };

  it('passes an intact artifact, with per-entry results and a trusted signature', async () => {
    const r = await verifyArtifact(signed, { publicKey: keys.publicKey });
    expect(r.ok).toBe(true);
    expect(r.entries.map((e) => [e.name, e.ok])).toEqual([['disk.qcow2', true], ['kernel', true], ['initrd', true]]);
    expect(r.signature).toMatchObject({ status: 'trusted', keyId: keys.keyId });
    expect(r.failed).toEqual([]);
  });

  it('names the entry whose stored bytes were flipped (first, middle and last byte of each entry)', async () => {
    const manifestLength = original.readBigUInt64LE(original.length - FOOTER_SIZE + 24);
    for (const reg of regions(manifest, Number(manifestLength))) {
      for (const off of [reg.data, reg.data + Math.floor(reg.size / 2), reg.data + reg.size - 1]) {
        const r = await verifyArtifact(await tampered(off), { publicKey: keys.publicKey });
        expect(r.ok, `flip at ${off} in ${reg.name}`).toBe(false);
        expect(r.failed[0]).toBe(reg.name);
        expect(r.entries.filter((e) => !e.ok).map((e) => e.name)).toEqual([reg.name]);
      }
    }
  });

  it('names manifest.json when a manifest byte is flipped', async () => {
    for (const off of [512, 600, 512 + 100]) {
      const err = await verifyArtifact(await tampered(off)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ArtifactError);
      expect((err as ArtifactError).message).toMatch(/manifest\.json does not match/);
      expect((err as ArtifactError).exitCode).toBe(ExitCode.integrity);
    }
  });

  it('names the member whose tar header was altered, and catches altered padding as framing', async () => {
    const manifestLength = Number(original.readBigUInt64LE(original.length - FOOTER_SIZE + 24));
    const regs = regions(manifest, manifestLength);
    for (const reg of regs) {
      const err = await verifyArtifact(await tampered(reg.header + 140)).catch((e: unknown) => e); // inside the mtime field
      expect((err as Error).message).toMatch(new RegExp(`checksum mismatch at member "${reg.name}\\.zst"`));
    }
    const pad = regs[0].data + regs[0].size; // first padding byte after the disk's data (size is not a multiple of 512)
    expect(regs[0].size % 512).not.toBe(0);
    const r = await verifyArtifact(await tampered(pad));
    expect(r.ok).toBe(false);
    expect(r.failed).toEqual(['framing']);
  });

  it('names a member header whose number fields node-tar cannot decode (fuzz crash header-base256: was exit 70)', async () => {
    const manifestLength = Number(original.readBigUInt64LE(original.length - FOOTER_SIZE + 24));
    for (const at of [0, regions(manifest, manifestLength)[1].header]) {
      const b = Buffer.from(original);
      b[at + 100] = 0xfe; // the mode field: a high bit says base-256, 0xfe is neither of its two valid lead bytes
      const f = path.join(dir, `base256-${at}.smolmachine`);
      await writeFile(f, b);
      for (const read of [verifyArtifact, (x: string) => extractArtifact(x, path.join(dir, `never-${at}`))]) {
        const err = await read(f).then(() => null, (e: unknown) => e);
        expect(err).toBeInstanceOf(ArtifactError);
        expect((err as ArtifactError).message).toMatch(new RegExp(`tar header at offset ${at} .*cannot be decoded: invalid base256 encoding`));
      }
    }
  });

  // a prime under the 512-byte tar block hits every header and block; in the footer every byte of the fixed
  // fields (0..32), and of the two digests and the signature, whose bytes all play one part, every 7th and
  // their ends. SMOL_TEST_LONG=1: every 211th byte and the whole footer.
  const stride = ciOrLong(509, 211);
  const footerBytes = Array.from({ length: FOOTER_SIZE }, (_, i) => i).filter((i) => longTests || i < 32 || i % 7 === 0 || [63, 64, 95, 96, 159].includes(i));
  it(`detects a flip of any single byte (every ${stride}th byte of a small artifact, plus ${footerBytes.length} of the footer's)`, async () => {
    const small = path.join(dir, 'small.smolmachine');
    await packArtifact({ kernel: inputs.kernel, initrd: inputs.initrd, out: small, signKey: keys.privateKey, createdAt: '2026-01-01T00:00:00Z' });
    const bytes = await readFile(small);
    const offsets = [...Array.from({ length: Math.ceil(bytes.length / stride) }, (_, i) => i * stride), ...footerBytes.map((i) => bytes.length - FOOTER_SIZE + i)];
    let detected = 0;
    for (const off of offsets) {
      const b = Buffer.from(bytes);
      b[off] ^= 0x80;
      const f = path.join(dir, 'flip.smolmachine');
      await writeFile(f, b);
      const r = await verifyArtifact(f).catch((e: unknown) => e);
      if (r instanceof Error || !(r as { ok: boolean }).ok) detected++;
      else throw new Error(`flip at ${off} of ${bytes.length} went undetected`);
    }
    expect(detected).toBe(offsets.length);
  }, 120_000); // ~300 verifies, each decompressing the intact entries (a zstd process each): seconds idle, more under load

  it('reports a truncated file precisely', async () => {
    for (const cut of [10, 1000, original.length - FOOTER_SIZE, original.length - 1]) {
      const f = path.join(dir, `cut-${cut}.smolmachine`);
      await writeFile(f, original.subarray(0, cut));
      await expect(verifyArtifact(f)).rejects.toThrow(/truncated/);
    }
  });

  it('signatures: wrong key, missing signature, stripped signature, altered signature', async () => {
    expect((await verifyArtifact(signed)).signature.status).toBe('unverified');
    const wrong = await verifyArtifact(signed, { publicKey: other.publicKey });
    expect(wrong).toMatchObject({ ok: false, failed: ['signature'], signature: { status: 'wrong-key', keyId: keys.keyId, expectedKeyId: other.keyId } });
    const unsigned = await verifyArtifact(plain, { publicKey: keys.publicKey });
    expect(unsigned).toMatchObject({ ok: false, signature: { status: 'missing' } });
    expect((await verifyArtifact(plain)).signature.status).toBe('unsigned');

    // strip: clear the signed flag and the signature bytes; the manifest still names the signer
    const stripped = Buffer.from(original);
    const foot = stripped.length - FOOTER_SIZE;
    stripped.writeUInt32LE(0, foot + 12);
    stripped.fill(0, foot + 96);
    const sf = path.join(dir, 'stripped.smolmachine');
    await writeFile(sf, stripped);
    expect((await verifyArtifact(sf)).signature).toMatchObject({ status: 'missing', keyId: keys.keyId });

    const bad = await verifyArtifact(await tampered(original.length - 1), { publicKey: keys.publicKey });
    expect(bad).toMatchObject({ ok: false, failed: ['signature'], signature: { status: 'invalid' } });
  });
});
