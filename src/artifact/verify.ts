/**
 * inspect (footer + manifest only, O(1)) and verify (every byte: each entry through the checks extraction
 * runs (entry.ts: stored digest, decompressed size and digest, a self-contained disk), the tar framing
 * through the artifact digest, and the signature). Structural damage (truncation, a broken header, an
 * altered manifest, sizes over the caps) throws ArtifactError naming the member; content damage comes back
 * as per-entry results so the caller can say exactly which entry failed.
 */
import type { KeyObject } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { ArtifactError, NotFoundError } from '../errors/index.js';
import { checkCaps, checkEntry, defaultCaps, type ExtractCaps } from './entry.js';
import { FLAG_SIGNED, FOOTER_SIGNED_SIZE, type Footer } from './footer.js';
import { frameDigest, readHead, readLayout } from './layout.js';
import type { ArtifactManifest, EntryKind } from './manifest.js';
import { keyId, loadPublicKey, publicKeyFromDer, verifyBytes } from './sign.js';

export async function openArtifact(file: string): Promise<FileHandle> {
  try {
    return await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`artifact ${file} does not exist`, { where: file });
    throw err;
  }
}

export type SignatureStatus =
  | 'unsigned' // no signature, none required
  | 'unverified' // signed, and the signature matches the key recorded in the manifest, but no --key pinned it
  | 'trusted' // signed by the --key given
  | 'wrong-key' // validly signed, by another key than --key
  | 'invalid' // the signature does not match the bytes
  | 'missing'; // --key given (or the manifest names a signer) but the artifact carries no signature

export interface SignatureResult { status: SignatureStatus; ok: boolean; keyId?: string; expectedKeyId?: string }

export interface InspectResult {
  file: string;
  size: number;
  digest: string;
  manifest: ArtifactManifest;
  signed: boolean;
  keyId?: string;
}

export async function inspectArtifact(file: string): Promise<InspectResult> {
  const fh = await openArtifact(file);
  try {
    const head = await readHead(fh, file);
    return {
      file, size: head.fileSize, digest: head.footer.digest.toString('hex'), manifest: head.manifest,
      signed: (head.footer.flags & FLAG_SIGNED) !== 0, keyId: head.manifest.signature?.keyId,
    };
  } finally {
    await fh.close();
  }
}

export function checkSignature(footerBytes: Buffer, footer: Footer, manifest: ArtifactManifest, trusted?: KeyObject): SignatureResult {
  const signed = (footer.flags & FLAG_SIGNED) !== 0;
  const recorded = manifest.signature;
  const expectedKeyId = trusted ? keyId(trusted) : undefined;
  if (!signed) {
    // a manifest that names a signer with no signature behind it means the signature was stripped
    if (recorded || trusted) return { status: 'missing', ok: false, keyId: recorded?.keyId, expectedKeyId };
    return { status: 'unsigned', ok: true };
  }
  if (!recorded) return { status: 'invalid', ok: false, expectedKeyId };
  const embedded = publicKeyFromDer(recorded.publicKey);
  if (keyId(embedded) !== recorded.keyId || !verifyBytes(embedded, footerBytes.subarray(0, FOOTER_SIGNED_SIZE), footer.signature)) {
    return { status: 'invalid', ok: false, keyId: recorded.keyId, expectedKeyId };
  }
  if (!trusted) return { status: 'unverified', ok: true, keyId: recorded.keyId };
  if (expectedKeyId !== recorded.keyId) return { status: 'wrong-key', ok: false, keyId: recorded.keyId, expectedKeyId };
  return { status: 'trusted', ok: true, keyId: recorded.keyId, expectedKeyId };
}

export interface EntryResult {
  name: string; kind: EntryKind; ok: boolean; bytes: number;
  /** SHA-256 of the stored bytes: the manifest's and as read. */
  expected: string; actual: string;
  /** What is wrong with the entry, in the words extraction refuses it with. */
  problem?: string;
}
export interface VerifyResult {
  ok: boolean;
  file: string;
  size: number;
  digest: string;
  entries: EntryResult[];
  /** The tar framing (headers, padding, end blocks) through the artifact digest. */
  framing: { ok: boolean; expected: string; actual: string };
  signature: SignatureResult;
  /** Names of what failed: entry names, 'framing', 'signature'. */
  failed: string[];
  seconds: number;
}

export interface VerifyOptions { publicKey?: string | KeyObject; onBytes?: (n: number) => void; caps?: Partial<ExtractCaps> }

export async function verifyArtifact(file: string, opts: VerifyOptions = {}): Promise<VerifyResult> {
  const trusted = typeof opts.publicKey === 'string' ? await loadPublicKey(opts.publicKey) : opts.publicKey;
  const t0 = performance.now();
  const fh = await openArtifact(file);
  try {
    const layout = await readLayout(fh, file);
    checkCaps(layout.manifest, { ...defaultCaps, ...opts.caps }, file);
    const entries: EntryResult[] = [];
    for (const m of layout.members) {
      const r = await checkEntry(file, m, { onBytes: opts.onBytes });
      entries.push({ name: m.entry.name, kind: m.entry.kind, ok: !r.problem, bytes: m.size, expected: m.entry.stored.sha256, actual: r.stored, ...(r.problem ? { problem: r.problem } : {}) });
    }
    // framing is checked against the recorded entry digests so that it isolates headers, padding and manifest
    const frame = await frameDigest(fh, layout.members, layout.footerOffset, layout.members.map((m) => Buffer.from(m.entry.stored.sha256, 'hex')));
    const framing = { ok: frame.equals(layout.footer.digest), expected: layout.footer.digest.toString('hex'), actual: frame.toString('hex') };
    const footerBytes = Buffer.alloc(FOOTER_SIGNED_SIZE);
    await fh.read(footerBytes, 0, FOOTER_SIGNED_SIZE, layout.footerOffset);
    const signature = checkSignature(footerBytes, layout.footer, layout.manifest, trusted);
    const failed = entries.filter((e) => !e.ok).map((e) => e.name);
    if (!framing.ok) failed.push('framing');
    if (!signature.ok) failed.push('signature');
    return { ok: failed.length === 0, file, size: layout.fileSize, digest: framing.expected, entries, framing, signature, failed, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await fh.close();
  }
}

/** verify, throwing ArtifactError that names the first failure: for callers that just need "is it intact". */
export async function assertVerified(file: string, opts: VerifyOptions = {}): Promise<VerifyResult> {
  const r = await verifyArtifact(file, opts);
  if (!r.ok) throw new ArtifactError(describeFailure(r), { where: `${file}: ${r.failed[0]}` });
  return r;
}

export function describeFailure(r: VerifyResult): string {
  const bad = r.entries.find((e) => !e.ok);
  if (bad) return bad.problem ?? `entry ${bad.name} is corrupt: SHA-256 ${bad.actual.slice(0, 16)}… but the manifest records ${bad.expected.slice(0, 16)}…`;
  if (!r.framing.ok) return 'artifact framing (tar headers or padding) was altered: the artifact digest does not match the footer';
  return describeSignature(r.signature);
}

export function describeSignature(s: SignatureResult): string {
  const msg: Record<SignatureStatus, string> = {
    missing: `artifact is not signed${s.expectedKeyId ? ` (expected key ${s.expectedKeyId})` : ''}${s.keyId ? `, though its manifest names signer ${s.keyId}: the signature was stripped` : ''}`,
    invalid: `signature is invalid${s.keyId ? ` (claimed signer ${s.keyId})` : ''}: the artifact was altered after signing`,
    'wrong-key': `artifact is signed by key ${s.keyId}, not by the expected key ${s.expectedKeyId}`,
    unsigned: 'ok', unverified: 'ok', trusted: 'ok',
  };
  return msg[s.status];
}
