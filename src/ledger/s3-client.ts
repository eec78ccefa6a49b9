/**
 * The S3 side of the S3 blob store (s3-blobs.ts): where blobs go (`s3://bucket/prefix`), a client built from
 * the standard AWS environment, and the SDK's errors turned into ones that name the bucket and key and say
 * what to do. Kept apart so the store reads as the BlobStore contract and this file as the S3 plumbing.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { ExitCode, LedgerError, type ErrorDetail, type ExitCodeValue } from '../errors/index.js';

/**
 * Connecting gives up after 10 s (an endpoint that drops SYNs), and a request whose socket sends nothing for
 * 60 s is abandoned (a server that stalls mid-body); both are then retried by the SDK's own policy (3 tries).
 */
export const S3_CONNECT_TIMEOUT_MS = 10_000;
export const S3_REQUEST_TIMEOUT_MS = 60_000;

export interface S3Where { bucket: string; prefix: string; endpoint?: string }

/** A blob store that cannot be used as configured (bucket, credentials, endpoint): the exit code says which. */
export class BlobStoreError extends LedgerError {
  constructor(message: string, detail: ErrorDetail, code: ExitCodeValue) { super(message, detail, code); }
}

export const isS3Url = (s: string): boolean => /^s3:\/\//i.test(s);

// S3's bucket naming rules (lowercase, digits, dots, hyphens, 3-63), so a typo fails here and not as a 400
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** `s3://bucket/some/prefix` → bucket and prefix ('' for the bucket's root); `where` names the flag or variable. */
export function parseS3Url(url: string, where: string): S3Where {
  const m = /^s3:\/\/([^/?#]*)\/?([^?#]*)$/i.exec(url);
  const hint = 'Give the store as s3://BUCKET or s3://BUCKET/PREFIX (for example s3://traces/smol).';
  if (!m) throw new BlobStoreError(`${url} is not an s3://BUCKET/PREFIX URL`, { where, hint }, ExitCode.usage);
  const [, bucket, rawPrefix] = m;
  if (!BUCKET_RE.test(bucket)) throw new BlobStoreError(`"${bucket}" in ${url} is not a valid S3 bucket name (3-63 lowercase letters, digits, dots, hyphens)`, { where, hint }, ExitCode.usage);
  const prefix = rawPrefix.replace(/\/+$/, '');
  if (prefix !== '' && prefix.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw new BlobStoreError(`the prefix "${rawPrefix}" in ${url} has an empty, "." or ".." segment`, { where, hint }, ExitCode.usage);
  }
  return { bucket, prefix };
}

/**
 * A client from the environment the ledger was opened with: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for a
 * self-hosted server, AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN]; what is unset
 * there falls to the SDK's own chain (~/.aws files, SSO, instance roles). SMOL_S3_FORCE_PATH_STYLE=1 puts the
 * bucket in the path (http://host/bucket/key), which self-hosted servers usually need.
 */
export function s3ClientFor(env: NodeJS.ProcessEnv): { client: S3Client; endpoint?: string } {
  // smol runs on Node 20 on purpose; the SDK's "needs Node 22 from 2027" warning would land in every command's stderr
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  // SigV4 needs a region even where the server ignores it; AWS itself must be told (its buckets live in one)
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || (endpoint ? 'us-east-1' : undefined);
  const credentials = env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
    ? { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) }
    : undefined;
  const client = new S3Client({
    ...(endpoint ? { endpoint } : {}), ...(region ? { region } : {}), ...(credentials ? { credentials } : {}),
    forcePathStyle: env.SMOL_S3_FORCE_PATH_STYLE === '1' || env.SMOL_S3_FORCE_PATH_STYLE === 'true',
    requestHandler: { connectionTimeout: S3_CONNECT_TIMEOUT_MS, requestTimeout: S3_REQUEST_TIMEOUT_MS },
    // every read is hashed against its sha256 digest anyway; the SDK's default CRC32 trailers and aws-chunked
    // uploads are what most self-hosted S3 servers reject
    requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return { client, endpoint };
}

interface SdkError { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number }; cause?: { code?: string } }

/** HeadObject answers a missing key (and a missing bucket) with a bare 404: the SDK calls it NotFound. */
export function isNotFound(err: unknown): boolean {
  const e = err as SdkError;
  return e?.name === 'NotFound' || e?.name === 'NoSuchKey' || (e?.$metadata?.httpStatusCode === 404 && e?.name !== 'NoSuchBucket');
}

const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ECONNABORTED']);
const DENIED = new Set(['AccessDenied', 'Forbidden', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken', 'CredentialsProviderError', 'AllAccessDisabled']);

/** The bucket does not exist: named as such whichever request found out. */
export function noSuchBucket(op: string, at: S3Where): BlobStoreError {
  return new BlobStoreError(`${op} failed: bucket ${at.bucket} does not exist${at.endpoint ? ` at ${at.endpoint}` : ''}`, {
    where: `s3://${at.bucket}`,
    hint: 'Create the bucket, or fix --blobs / $SMOL_BLOBS. For a self-hosted server check AWS_ENDPOINT_URL and set SMOL_S3_FORCE_PATH_STYLE=1.',
  }, ExitCode.notFound);
}

/** `op` ("reading blob sha256:…"), the object's s3:// URL, and the bucket's place for the hint. */
export function s3Error(err: unknown, op: string, url: string, at: S3Where): BlobStoreError {
  if (err instanceof BlobStoreError) return err;
  const e = err as SdkError;
  const name = e?.name ?? '';
  const code = e?.code ?? e?.cause?.code ?? '';
  const status = e?.$metadata?.httpStatusCode;
  const msg = e?.message || name || String(err);
  const server = at.endpoint ?? 'AWS S3';
  if (name === 'NoSuchBucket') return noSuchBucket(op, at);
  if (DENIED.has(name) || status === 403) {
    return new BlobStoreError(`${op} failed: ${server} refused access to ${url} (${name || status}: ${msg})`, {
      where: url, cause: err,
      hint: 'Check the credentials this host uses (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, its role) and that they may read and write s3://' + at.bucket + '; a wrong AWS_REGION also breaks signatures.',
    }, ExitCode.prerequisite);
  }
  if (/region is missing/i.test(msg)) {
    return new BlobStoreError(`${op} failed: no AWS region is configured`, { where: '$AWS_REGION', cause: err, hint: 'Set AWS_REGION to the bucket\'s region (or AWS_ENDPOINT_URL for a self-hosted server).' }, ExitCode.prerequisite);
  }
  if (NETWORK.has(code) || name === 'TimeoutError' || name === 'RequestTimeout' || name === 'SlowDown' || (status !== undefined && status >= 500)) {
    return new BlobStoreError(`${op} failed: cannot reach ${server} for ${url} (${code || name || status}: ${msg})`, {
      where: url, cause: err,
      hint: `Check that ${server} is up and reachable from this host${at.endpoint ? '' : ' (or set AWS_ENDPOINT_URL for a self-hosted server)'}; retrying later may work.`,
    }, ExitCode.tempFail);
  }
  return new BlobStoreError(`${op} failed: ${name ? `${name}: ` : ''}${msg}`, { where: url, cause: err }, ExitCode.failure);
}
