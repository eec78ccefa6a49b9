/** What both blob stores share: digests, the size cap and its error (no store imports the other). */
import { createHash } from 'node:crypto';
import { BLOB_MAX_BYTES } from './limits.js';
import { IntegrityError } from './errors.js';
import { ExitCode, LedgerError, type ErrorDetail } from '../errors/index.js';

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
