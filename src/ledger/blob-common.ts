/** What both blob stores share: digests, the size cap and its error (no store imports the other). */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { BLOB_MAX_BYTES } from './limits.js';
import { IntegrityError } from './errors.js';
import { ExitCode, LedgerError, mapFsError, SmolError, type ErrorDetail } from '../errors/index.js';

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

export function digestOf(data: Buffer | string): string {
  return 'sha256:' + createHash('sha256').update(data).digest('hex');
}

export function isDigest(s: string): boolean {
  return DIGEST_RE.test(s);
}

/** A blob over the cap was offered for writing (exit 65): raise SMOL_BLOB_MAX_BYTES or keep the payload elsewhere. */
export class BlobTooLargeError extends LedgerError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, detail, ExitCode.invalidInput); }
}

/** The size cap in bytes: $SMOL_BLOB_MAX_BYTES (a positive integer), else BLOB_MAX_BYTES. */
export function blobMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SMOL_BLOB_MAX_BYTES;
  if (raw === undefined || raw === '') return BLOB_MAX_BYTES;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new LedgerError(`SMOL_BLOB_MAX_BYTES=${raw} is not a positive whole number of bytes`, { where: '$SMOL_BLOB_MAX_BYTES', hint: `Unset it for the default (${BLOB_MAX_BYTES}) or give a byte count, e.g. 1073741824 for 1 GiB.` }, ExitCode.usage);
  }
  return n;
}

export const tooLarge = (what: string, max: number) =>
  new BlobTooLargeError(`${what} is larger than the blob size cap (${max} bytes)`, { where: '$SMOL_BLOB_MAX_BYTES', hint: 'Raise SMOL_BLOB_MAX_BYTES on every host that writes or reads it, or store less per item.' });

/** A stored blob over the cap is read as damage (a corrupt or hostile row), never allocated. */
export const overCapOnRead = (digest: string, where: string, max: number) =>
  new IntegrityError(`blob ${digest} is larger than the blob size cap (${max} bytes); it was not read`, { where, hint: 'If the blob is genuine, raise SMOL_BLOB_MAX_BYTES; otherwise the store is damaged (`smol ledger check --blobs`).' });

/** A remote store's whole blob in memory; its read has checked the digest by the time `chunks` ends. */
export async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}

/**
 * A remote store's blob as a local file (a stage reads its input from one): streamed to a temp file and renamed
 * into `cacheDir` only once `chunks` has ended, which is when the store's read has checked the digest.
 */
export async function cacheBlobFile(cacheDir: string, digest: string, chunks: AsyncIterable<Buffer>): Promise<string> {
  const hex = digest.slice(-64);
  const dest = path.join(cacheDir, hex.slice(0, 2), hex.slice(2));
  if (fs.existsSync(dest)) {
    // a hit is a use: `smol prune` keeps cache files used within its grace
    try { const now = new Date(); fs.utimesSync(dest, now, now); } catch { /* read-only cache: still usable */ }
    return dest;
  }
  const tmp = `${dest}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.promises.mkdir(path.dirname(dest), { recursive: true });
    await pipeline(chunks, fs.createWriteStream(tmp));
    await fs.promises.rename(tmp, dest);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true });
    if (err instanceof SmolError) throw err;
    throw mapFsError(err, `writing blob ${digest} to ${cacheDir}`);
  }
  return dest;
}
