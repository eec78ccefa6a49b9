/** The S3 store's configuration and error mapping, without a server: URLs, store selection, exit codes. */
import { describe, expect, it } from 'vitest';
import { blobsEnv } from '../../../src/cli/commands/ledger/open.js';
import { resolveLedger } from '../../../src/ledger/open.js';
import { BlobStoreError, parseS3Url, s3Error } from '../../../src/ledger/s3-client.js';
import { infraFailure } from '../../../src/rollout/infra.js';

const at = { bucket: 'traces', prefix: 'smol', endpoint: 'http://10.0.0.5:9000' };
const url = 's3://traces/smol/sha256/ab/abc';

describe('S3 blob store configuration', () => {
  it('parses s3://bucket/prefix and refuses what S3 would reject, naming the flag', () => {
    expect(parseS3Url('s3://traces', '--blobs')).toEqual({ bucket: 'traces', prefix: '' });
    expect(parseS3Url('s3://traces/a/b/', '--blobs')).toEqual({ bucket: 'traces', prefix: 'a/b' });
    for (const bad of ['s3://', 's3://Traces/x', 's3://a/x', 's3://traces/a//b', 's3://traces/../x', 'http://traces/x']) {
      expect(() => parseS3Url(bad, '--blobs'), bad).toThrow(expect.objectContaining({ exitCode: 64, where: '--blobs' }));
    }
    expect(() => blobsEnv('s3://UPPER/x')).toThrow(expect.objectContaining({ where: '--blobs' }));
    expect(blobsEnv('s3://traces/x', {}).SMOL_BLOBS).toBe('s3://traces/x');
  });

  it('selects the S3 store for SQLite and PostgreSQL ledgers alike, with a local cache for fileOf', () => {
    const env = { SMOL_HOME: '/h', SMOL_BLOBS: 's3://traces/smol' };
    expect(resolveLedger('/h/l.db', env)).toMatchObject({ backend: 'sqlite', blobStore: 's3', blobsUrl: 's3://traces/smol', blobs: '/h/cache/blobs' });
    expect(resolveLedger('postgres://u:p@db/x', env)).toMatchObject({ backend: 'postgres', blobStore: 's3', blobsUrl: 's3://traces/smol' });
    expect(() => resolveLedger('/h/l.db', { ...env, SMOL_BLOBS: 's3://bad_bucket' })).toThrow(expect.objectContaining({ exitCode: 64, where: '$SMOL_BLOBS' }));
  });

  it('maps the SDK\'s errors to precise ones, and a worker keeps "out of reach" apart from "misconfigured"', () => {
    const sdk = (name: string, status?: number, extra: object = {}) => Object.assign(new Error(`${name} happened`), { name, $metadata: { httpStatusCode: status } }, extra);
    const cases: [unknown, number, RegExp][] = [
      [sdk('NoSuchBucket', 404), 66, /bucket traces does not exist at http:\/\/10\.0\.0\.5:9000/],
      [sdk('AccessDenied', 403), 69, /refused access to s3:\/\/traces\/smol\/sha256\/ab\/abc/],
      [sdk('Forbidden', 403), 69, /refused access/],
      [sdk('Error', undefined, { code: 'ECONNREFUSED' }), 75, /cannot reach http:\/\/10\.0\.0\.5:9000/],
      [sdk('SlowDown', 503), 75, /cannot reach/],
      [sdk('InternalError', 500), 75, /cannot reach/],
      [new Error('Region is missing'), 69, /no AWS region/],
    ];
    for (const [err, code, msg] of cases) {
      const e = s3Error(err, 'reading blob x', url, at);
      expect(e, (err as Error).name).toBeInstanceOf(BlobStoreError);
      expect(e.exitCode, (err as Error).name).toBe(code);
      expect(e.message).toMatch(msg);
      expect(e.hint, (err as Error).name).toBeTruthy();
    }
    expect(infraFailure('blob', 'reading input blob x', url, s3Error(sdk('Error', undefined, { code: 'ETIMEDOUT' }), 'r', url, at)).exitCode).toBe(75);
    expect(infraFailure('blob', 'reading input blob x', url, s3Error(sdk('AccessDenied', 403), 'r', url, at)).exitCode).toBe(69);
    expect(infraFailure('blob', 'reading input blob x', url, s3Error(sdk('NoSuchBucket', 404), 'r', url, at)).exitCode).toBe(69);
  });
});
