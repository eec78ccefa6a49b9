/**
 * The S3 blob store (`--blobs s3://bucket/prefix`, or $SMOL_BLOBS): for users who keep large traces in an
 * object store every host reaches. A blob is the object `<prefix>/sha256/<aa>/<64 hex>`, content-addressed
 * like the other stores. A put returns only once S3 has acknowledged the whole object (PutObject, or a
 * multipart upload completed), so it is durable before any row names it; a multipart upload is aborted if
 * its bytes do not hash to the digest or overrun the cap, so a bad stream never becomes an object. Reads stream
 * the body, refuse a Content-Length over the cap before reading a byte, and hash as they go: a wrong byte,
 * a short body or a missing key is an IntegrityError. Nothing is ever held whole except by get().
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateMultipartUploadCommand, GetObjectCommand,
  HeadBucketCommand, HeadObjectCommand, PutObjectCommand, UploadPartCommand, paginateListObjectsV2, type S3Client,
} from '@aws-sdk/client-s3';
import { blobMaxBytes, cacheBlobFile, collect, digestOf, isDigest, overCapOnRead, tooLarge } from './blob-common.js';
import type { BlobStore } from './blobs.js';
import { IntegrityError } from './errors.js';
import { BLOB_CHUNK_BYTES } from './limits.js';
import { isNotFound, noSuchBucket, parseS3Url, s3ClientFor, s3Error, type S3Where } from './s3-client.js';
import { SmolError } from '../errors/index.js';

/** Blobs up to one part go in one PutObject; larger ones in parts of this size (S3's minimum part is 5 MiB). */
export const S3_PART_BYTES = 8 * 1024 * 1024;
/** S3 allows at most 10,000 parts: a cap raised past 80 GB gets larger parts instead of a failed upload. */
const S3_MAX_PARTS = 10_000;
/** HeadObject/PutObject requests in flight at once for missing() and putMany(): parallel, but bounded. */
const S3_PARALLEL = 16;
const KEY_TAIL_RE = /^([0-9a-f]{2})\/([0-9a-f]{64})$/;

export interface S3BlobStoreOptions {
  /** Where fileOf() streams blobs for programs that read a file (content-addressed, so reused across attempts). */
  cacheDir: string;
  maxBytes?: number;
  /** The environment the endpoint, region and credentials come from (s3-client.ts). */
  env?: NodeJS.ProcessEnv;
  /** The flag or variable the URL came from, for messages. */
  from?: string;
  client?: S3Client;
}

/**
 * Re-cuts a stream's pieces into parts of exactly `size` bytes (the last may be shorter): one part in
 * memory, and a piece already a part's size or larger (put() of a big buffer) is cut into views, not copied.
 */
async function* partsOf(source: AsyncIterable<Buffer> | Iterable<Buffer>, size: number): AsyncIterable<Buffer> {
  let held: Buffer[] = [];
  let n = 0;
  for await (const piece of source) {
    let p = piece;
    while (n + p.length >= size) {
      const take = size - n;
      held.push(p.subarray(0, take));
      yield held.length === 1 ? held[0] : Buffer.concat(held, size);
      held = [];
      n = 0;
      p = p.subarray(take);
    }
    if (p.length) { held.push(p); n += p.length; }
  }
  if (n > 0) yield held.length === 1 ? held[0] : Buffer.concat(held, n);
}

/** Runs `fn` over `xs`, at most `limit` at a time, results in order. */
async function mapBounded<T, R>(xs: T[], limit: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(xs.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, async () => {
    while (next < xs.length) { const i = next++; out[i] = await fn(xs[i]); }
  }));
  return out;
}

export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly where: string;
  private readonly at: S3Where;
  private readonly client: S3Client;
  private readonly maxBytes: number;
  private readonly partBytes: number;
  /** A bare 404 from HeadObject may mean "no bucket": checked once per store, then trusted. */
  private bucketSeen = false;

  constructor(url: string, private readonly o: S3BlobStoreOptions) {
    const env = o.env ?? process.env;
    this.at = parseS3Url(url, o.from ?? '$SMOL_BLOBS');
    const made = o.client ? { client: o.client, endpoint: env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined } : s3ClientFor(env);
    this.client = made.client;
    this.at.endpoint = made.endpoint;
    this.where = `s3://${this.at.bucket}${this.at.prefix ? `/${this.at.prefix}` : ''}${made.endpoint ? ` at ${made.endpoint}` : ''}`;
    this.maxBytes = o.maxBytes ?? blobMaxBytes(env);
    this.partBytes = Math.max(S3_PART_BYTES, Math.ceil(this.maxBytes / S3_MAX_PARTS));
  }

  /** The object key of a digest; anything not a digest never becomes a key. */
  keyOf(digest: string): string {
    if (!isDigest(digest)) throw new IntegrityError(`not a blob digest: ${digest}`, { where: 'blob reference' });
    const hex = digest.slice(7);
    return `${this.at.prefix ? `${this.at.prefix}/` : ''}sha256/${hex.slice(0, 2)}/${hex}`;
  }
  private urlOf(key: string): string { return `s3://${this.at.bucket}/${key}`; }
  private fail(err: unknown, op: string, key: string): Error {
    return err instanceof SmolError ? err : s3Error(err, op, this.urlOf(key), this.at);
  }

  async has(digest: string): Promise<boolean> {
    const Key = this.keyOf(digest);
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.at.bucket, Key }));
      this.bucketSeen = true;
      return true;
    } catch (err) {
      if (!isNotFound(err)) throw this.fail(err, `looking up blob ${digest}`, Key);
      await this.bucketExists(`looking up blob ${digest}`);
      return false;
    }
  }

  private async bucketExists(op: string): Promise<void> {
    if (this.bucketSeen) return;
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.at.bucket }));
    } catch (err) {
      if (isNotFound(err)) throw noSuchBucket(op, this.at);
      throw s3Error(err, op, `s3://${this.at.bucket}`, this.at);
    }
    this.bucketSeen = true;
  }

  async missing(digests: string[]): Promise<string[]> {
    const present = await mapBounded(digests, S3_PARALLEL, (d) => this.has(d));
    return digests.filter((_, i) => !present[i]);
  }

  async put(data: Buffer | string): Promise<string> {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    if (buf.length > this.maxBytes) throw tooLarge(`a ${buf.length}-byte blob`, this.maxBytes);
    const digest = digestOf(buf);
    await this.store(digest, [buf]);
    return digest;
  }

  /** S3 has no shared commit: each blob is its own request, a bounded number at a time. */
  async putMany(items: (Buffer | string)[]): Promise<string[]> {
    for (const d of items) { const n = Buffer.byteLength(d); if (n > this.maxBytes) throw tooLarge(`a ${n}-byte blob`, this.maxBytes); }
    return mapBounded(items, S3_PARALLEL, (d) => this.put(d));
  }

  /** Hashes the file in a first streamed pass (a blob already there is not sent again), then streams it up. */
  async putFile(file: string): Promise<string> {
    const size = (await fs.promises.stat(file)).size;
    if (size > this.maxBytes) throw tooLarge(file, this.maxBytes);
    const h = createHash('sha256');
    await pipeline(fs.createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES }), h);
    const digest = 'sha256:' + h.digest('hex');
    if (size > this.partBytes && await this.has(digest)) return digest;
    await this.store(digest, fs.createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES }));
    return digest;
  }

  /**
   * Writes `digest` from `source`, re-hashing on the way: one PutObject when it fits a part, else a multipart
   * upload completed only once the bytes proved to be `digest` (aborted otherwise, so no object appears).
   * Writing a digest that is there already rewrites the same bytes, harmlessly.
   */
  async store(digest: string, source: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<boolean> {
    const Key = this.keyOf(digest);
    const h = createHash('sha256');
    let size = 0;
    const count = (b: Buffer) => {
      size += b.length;
      if (size > this.maxBytes) throw tooLarge(`blob ${digest}`, this.maxBytes);
      h.update(b);
    };
    const parts = partsOf(source, this.partBytes)[Symbol.asyncIterator]();
    try {
      return await this.upload(digest, Key, parts, count, () => 'sha256:' + h.digest('hex') !== digest);
    } finally {
      await parts.return?.(); // a refused or failed upload closes the file it was reading
    }
  }

  private async upload(digest: string, Key: string, parts: AsyncIterator<Buffer>, count: (b: Buffer) => void, differs: () => boolean): Promise<boolean> {
    const op = `writing blob ${digest}`;
    const wrong = () => new IntegrityError(`the bytes offered as blob ${digest} hash to something else; nothing was stored`, { where: this.urlOf(Key) });
    const first = await parts.next();
    const head = first.done ? Buffer.alloc(0) : first.value;
    count(head);
    let second = first.done ? first : await parts.next();
    if (second.done) {
      if (differs()) throw wrong();
      try {
        await this.client.send(new PutObjectCommand({ Bucket: this.at.bucket, Key, Body: head, ContentLength: head.length, ContentType: 'application/octet-stream' }));
      } catch (err) {
        throw this.fail(err, op, Key);
      }
      return true;
    }
    let UploadId: string | undefined;
    try {
      UploadId = (await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.at.bucket, Key, ContentType: 'application/octet-stream' }))).UploadId;
      const done: { ETag?: string; PartNumber: number }[] = [];
      const send = async (Body: Buffer) => {
        const PartNumber = done.length + 1;
        const r = await this.client.send(new UploadPartCommand({ Bucket: this.at.bucket, Key, UploadId, PartNumber, Body, ContentLength: Body.length }));
        done.push({ ETag: r.ETag, PartNumber });
      };
      await send(head);
      for (; !second.done; second = await parts.next()) {
        count(second.value);
        await send(second.value);
      }
      if (differs()) throw wrong();
      await this.client.send(new CompleteMultipartUploadCommand({ Bucket: this.at.bucket, Key, UploadId, MultipartUpload: { Parts: done } }));
      return true;
    } catch (err) {
      // best effort: a failed abort leaves parts the bucket's lifecycle rule (docs/ledger.md) cleans up
      if (UploadId) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.at.bucket, Key, UploadId })).catch(() => {});
      throw this.fail(err, op, Key);
    }
  }

  async *read(digest: string): AsyncIterable<Buffer> {
    const Key = this.keyOf(digest);
    const where = this.urlOf(Key);
    const op = `reading blob ${digest}`;
    let res;
    try {
      res = await this.client.send(new GetObjectCommand({ Bucket: this.at.bucket, Key }));
    } catch (err) {
      if (isNotFound(err)) throw new IntegrityError(`blob ${digest} is missing`, { where, hint: `No object ${Key} in bucket ${this.at.bucket}: check that every host uses the same --blobs / $SMOL_BLOBS.` });
      throw this.fail(err, op, Key);
    }
    const body = res.Body as Readable | undefined;
    const declared = res.ContentLength;
    const h = createHash('sha256');
    let total = 0;
    try {
      // refused on the header alone: not one byte of an oversized body is read
      if (declared !== undefined && declared > this.maxBytes) throw overCapOnRead(digest, where, this.maxBytes);
      if (!body) throw new IntegrityError(`blob ${digest}: the server sent no body`, { where });
      for await (const chunk of body as AsyncIterable<Buffer>) {
        total += chunk.length;
        if (total > this.maxBytes) throw overCapOnRead(digest, where, this.maxBytes);
        h.update(chunk);
        yield chunk;
      }
    } catch (err) {
      throw this.fail(err, op, Key);
    } finally {
      // a consumer that stops early, or a refusal, must not leave the socket downloading
      body?.destroy();
    }
    if ((declared !== undefined && total !== declared) || 'sha256:' + h.digest('hex') !== digest) {
      throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where });
    }
  }

  get(digest: string): Promise<Buffer> { return collect(this.read(digest)); }
  async getText(digest: string): Promise<string> { return (await this.get(digest)).toString('utf8'); }

  /** Streams the blob to a temp file and renames it into the cache only once the digest has checked out. */
  async fileOf(digest: string): Promise<string> {
    this.keyOf(digest); // refuses what is not a digest before any path is made from it
    return cacheBlobFile(this.o.cacheDir, digest, this.read(digest));
  }

  /** Every `<prefix>/sha256/<aa>/<hex>` object, page by page; other keys under the prefix are not blobs. */
  async *list(): AsyncIterable<string> {
    const Prefix = `${this.at.prefix ? `${this.at.prefix}/` : ''}sha256/`;
    try {
      for await (const page of paginateListObjectsV2({ client: this.client }, { Bucket: this.at.bucket, Prefix })) {
        for (const o of page.Contents ?? []) {
          const m = KEY_TAIL_RE.exec((o.Key ?? '').slice(Prefix.length));
          if (m && m[2].startsWith(m[1])) yield `sha256:${m[2]}`;
        }
      }
    } catch (err) {
      throw this.fail(err, 'listing blobs', Prefix);
    }
  }

  close(): void {
    this.client.destroy();
  }
}
