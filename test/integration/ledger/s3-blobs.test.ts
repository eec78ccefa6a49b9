/**
 * The S3 blob store against a real S3-compatible server (s3rver on loopback, test/helpers/s3.ts), hostile
 * servers of our own for what a real one will not do, and one rollout end to end through the CLI with
 * --blobs s3://. Untested here: AWS S3 itself, MinIO, R2, their multipart limits, IAM policies.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobTooLargeError, digestOf } from '../../../src/ledger/blobs.js';
import { checkLedger } from '../../../src/ledger/check.js';
import { FileBlobStore } from '../../../src/ledger/file-blobs.js';
import { IntegrityError } from '../../../src/ledger/errors.js';
import { openLedger, type OpenLedger } from '../../../src/ledger/open.js';
import { S3_PART_BYTES, S3BlobStore } from '../../../src/ledger/s3-blobs.js';
import { BlobStoreError } from '../../../src/ledger/s3-client.js';
import { newItem } from '../../unit/ledger/contract.js';
import { startS3, type S3Server } from '../../helpers/s3.js';
import { smolRun } from '../rollout/procs.js';

const BUCKET = 'smol-test';
let s3: S3Server;
let raw: S3Client;
let tmp: string;
let n = 0;

/** A SQLite ledger in a fresh home whose blobs are objects under s3://smol-test/<prefix>. */
async function host(prefix: string, extra: NodeJS.ProcessEnv = {}): Promise<OpenLedger> {
  const home = fs.mkdtempSync(path.join(tmp, 'home-'));
  return openLedger(path.join(home, 'ledger.db'), { SMOL_HOME: home, SMOL_BLOBS: `s3://${BUCKET}/${prefix}`, ...s3.env, ...extra });
}
const close = async (l: OpenLedger) => { await l.blobs.close(); await l.ledger.close(); };
const keyOf = (prefix: string, digest: string) => `${prefix}/sha256/${digest.slice(7, 9)}/${digest.slice(7)}`;
const objectBytes = async (key: string) => Buffer.from(await (await raw.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToByteArray());
const exists = (key: string) => raw.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })).then(() => true, () => false);

/** An HTTP server that answers every GET as `answer` says: what a broken or hostile S3 endpoint might send. */
async function hostile(answer: (res: http.ServerResponse) => void): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const srv = http.createServer((req, res) => { req.resume(); answer(res); });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { endpoint: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, stop: () => new Promise((r) => { srv.closeAllConnections(); srv.close(() => r()); }) };
}

beforeAll(async () => {
  s3 = await startS3([BUCKET]);
  raw = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-s3blobs-'));
});
afterAll(async () => {
  raw?.destroy();
  await s3?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('S3 blob store (s3rver)', () => {
  it('round-trips small and multipart blobs by bytes, file and stream, under content-addressed keys; has, missing, list', async () => {
    const prefix = `p${++n}`;
    const a = await host(prefix);
    expect(a.blobs.kind).toBe('s3');
    expect(a.blobs.where).toBe(`s3://${BUCKET}/${prefix} at ${s3.endpoint}`);
    const big = randomBytes(2 * S3_PART_BYTES + 12345); // three parts
    const ref = await a.blobs.put(big);
    expect(ref).toBe(digestOf(big));
    expect((await objectBytes(keyOf(prefix, ref))).equals(big)).toBe(true);
    expect((await a.blobs.get(ref)).equals(big)).toBe(true);
    expect(fs.readFileSync(await a.blobs.fileOf(ref)).equals(big)).toBe(true);
    let streamed = 0;
    for await (const c of a.blobs.read(ref)) streamed += c.length;
    expect(streamed).toBe(big.length);
    const file = path.join(tmp, 'big.bin');
    fs.writeFileSync(file, big);
    expect(await a.blobs.putFile(file)).toBe(ref);
    const refs = await a.blobs.putMany(['one', 'two', 'one', '']);
    expect(refs).toEqual([digestOf('one'), digestOf('two'), digestOf('one'), digestOf('')]);
    expect(await a.blobs.getText(refs[1])).toBe('two');
    expect(await a.blobs.getText(refs[3])).toBe('');
    expect(await a.blobs.has(ref)).toBe(true);
    expect(await a.blobs.missing([ref, digestOf('never'), refs[0]])).toEqual([digestOf('never')]);
    await expect(a.blobs.get(digestOf('never'))).rejects.toThrow(/blob sha256:\w+ is missing/);
    // a key under the prefix that is not a blob's is not listed
    await raw.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}/sha256/README`, Body: 'not a blob' }));
    const listed: string[] = [];
    for await (const d of a.blobs.list()) listed.push(d);
    expect(listed.sort()).toEqual([ref, ...new Set(refs)].sort());
    await close(a);
  });

  it('refuses wrong bytes, a missing object and a body over the cap; a stream that is not its digest never becomes an object', async () => {
    const prefix = `p${++n}`;
    const a = await host(prefix);
    const ref = await a.blobs.put('honest bytes');
    await raw.send(new PutObjectCommand({ Bucket: BUCKET, Key: keyOf(prefix, ref), Body: 'honest byteZ' }));
    await expect(a.blobs.get(ref)).rejects.toThrow(IntegrityError);
    await expect(a.blobs.get(ref)).rejects.toThrow(/corrupt \(content hash differs\)/);
    await expect(a.blobs.fileOf(ref)).rejects.toThrow(/corrupt/);
    expect(fs.readdirSync(a.location.blobs, { recursive: true }).filter((f) => String(f).endsWith('.tmp'))).toEqual([]);
    await raw.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: keyOf(prefix, ref) }));
    await expect(a.blobs.get(ref)).rejects.toThrow(/is missing/);
    // a host with a smaller cap refuses to read a larger blob
    const big = randomBytes(S3_PART_BYTES + 1);
    const bigRef = await a.blobs.put(big);
    const small = await host(prefix, { SMOL_BLOB_MAX_BYTES: String(S3_PART_BYTES) });
    await expect(small.blobs.get(bigRef)).rejects.toThrow(/larger than the blob size cap .* it was not read/);
    await expect(small.blobs.put(big)).rejects.toThrow(BlobTooLargeError);
    // bytes offered under another digest: single put and multipart alike are refused, and no object appears
    const store = a.blobs as S3BlobStore;
    const claimed = digestOf('what the caller claimed');
    await expect(store.store(claimed, [Buffer.from('something else')])).rejects.toThrow(/hash to something else/);
    await expect(store.store(claimed, [big, big])).rejects.toThrow(/hash to something else/);
    expect(await exists(keyOf(prefix, claimed))).toBe(false);
    await close(small);
    await close(a);
  });

  it('names the bucket and the fix: no such bucket (66), refused credentials (69), unreachable (75), a bad URL (64)', async () => {
    const nob = await host('x', { SMOL_BLOBS: 's3://no-such-bucket/x' });
    const e1 = await Promise.resolve(nob.blobs.put('a')).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(BlobStoreError);
    expect(e1).toMatchObject({ exitCode: 66, message: expect.stringContaining('bucket no-such-bucket does not exist') });
    // a HEAD's bare 404 is told apart from a missing key
    await expect(nob.blobs.has(digestOf('a'))).rejects.toThrow(/bucket no-such-bucket does not exist/);
    await close(nob);
    const denied = await host('x', { AWS_ACCESS_KEY_ID: 'WRONG', AWS_SECRET_ACCESS_KEY: 'WRONG' });
    await expect(denied.blobs.put('a')).rejects.toMatchObject({ exitCode: 69, message: expect.stringMatching(/refused access to s3:\/\/smol-test\/x\/sha256\/.*InvalidAccessKeyId/) });
    await close(denied);
    const gone = await hostile(() => {});
    await gone.stop(); // a port nothing listens on
    const off = await host('x', { AWS_ENDPOINT_URL: gone.endpoint });
    await expect(off.blobs.get(digestOf('a'))).rejects.toMatchObject({ exitCode: 75, message: expect.stringContaining(`cannot reach ${gone.endpoint}`) });
    await close(off);
    await expect(host('x', { SMOL_BLOBS: 's3://Bad_Bucket/x' })).rejects.toMatchObject({ exitCode: 64, where: '$SMOL_BLOBS' });
  });

  it('refuses a hostile server\'s oversized Content-Length before reading, and its wrong bytes after', async () => {
    const ref = digestOf('the real bytes');
    let sent = 0;
    const huge = await hostile((res) => {
      res.writeHead(200, { 'Content-Length': String(64 * 1024 ** 3), 'Content-Type': 'application/octet-stream' });
      // it would stream forever; what it managed to push before the client hung up is counted
      const push = () => { for (let more = true; more; sent += 64 * 1024) more = res.write(Buffer.alloc(64 * 1024)); };
      res.on('drain', push);
      push();
    });
    const liar = await hostile((res) => res.end('the fake bytes'));
    try {
      const a = await host('h', { AWS_ENDPOINT_URL: huge.endpoint });
      await expect(a.blobs.get(ref)).rejects.toThrow(/larger than the blob size cap \(268435456 bytes\); it was not read/);
      expect(sent).toBeLessThan(16 * 1024 * 1024); // socket buffers at most, never the body
      await close(a);
      const b = await host('h', { AWS_ENDPOINT_URL: liar.endpoint });
      await expect(b.blobs.get(ref)).rejects.toThrow(/corrupt \(content hash differs\)/);
      await close(b);
    } finally {
      await huge.stop();
      await liar.stop();
    }
  });

  it('ledger check --blobs verifies the S3 store: clean, then orphans counted and a corrupt object named', async () => {
    const prefix = `p${++n}`;
    const a = await host(prefix);
    const input = await a.blobs.put('sample input');
    await a.ledger.putManifest('sha256:m', 'x');
    await a.ledger.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, [{ ...newItem('r'), inputRef: input }]);
    await a.blobs.put('an orphan');
    expect(await checkLedger(a, { verifyBlobs: true })).toMatchObject({ blobStore: { kind: 's3' }, blobsChecked: 1, orphans: { count: 1 }, issues: [] });
    await raw.send(new PutObjectCommand({ Bucket: BUCKET, Key: keyOf(prefix, input), Body: 'sample inpuT' }));
    const bad = await checkLedger(a, { verifyBlobs: true });
    expect(bad.issues.map((i) => i.detail)).toEqual([expect.stringMatching(/^input of .*: blob sha256:\w+ is corrupt/)]);
    await close(a);
  });

  it('ledger migrate-blobs --to s3:// copies a file store in, re-hashed; a damaged file is reported, a rerun copies nothing twice', async () => {
    const home = fs.mkdtempSync(path.join(tmp, 'mig-'));
    const files = new FileBlobStore(path.join(home, 'blobs'));
    const big = randomBytes(S3_PART_BYTES + 5);
    const bigRef = files.put(big);
    const [small] = files.putMany(['a prompt']);
    const damaged = files.put(Buffer.alloc(70_000, 1));
    fs.writeFileSync(files.pathOf(damaged), Buffer.alloc(70_000, 2));
    files.close();
    const env = { SMOL_HOME: home, SMOL_LEDGER: '', SMOL_BLOBS: '', ...s3.env };
    const args = ['ledger', 'migrate-blobs', '--to', `s3://${BUCKET}/mig`, '--json'];
    const first = await smolRun(args, env);
    expect(first.code, first.stderr).toBe(76);
    expect(JSON.parse(first.stdout)).toMatchObject({ scanned: 3, copied: 2, present: 0, bytes: big.length + 'a prompt'.length, failed: [{ digest: damaged }] });
    expect(await exists(keyOf('mig', damaged))).toBe(false);
    expect((await objectBytes(keyOf('mig', bigRef))).equals(big)).toBe(true);
    expect((await objectBytes(keyOf('mig', small))).toString()).toBe('a prompt');
    fs.rmSync(new FileBlobStore(path.join(home, 'blobs')).pathOf(damaged));
    const again = await smolRun(args, env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ scanned: 2, copied: 0, present: 2, failed: [] });
  });

  it('runs a rollout end to end with a SQLite ledger and --blobs s3://: results readable, ledger check --blobs clean', async () => {
    const home = fs.mkdtempSync(path.join(tmp, 'e2e-'));
    const manifest = path.join(home, 'm.yaml');
    fs.writeFileSync(manifest, [
      'apiVersion: smol/v1', 'kind: Rollout', 'name: s3demo', 'environment: { version: e1 }', 'gpus: 1',
      'defaults: { maxAttempts: 2, timeout: 30s }', 'generate: { count: 4, template: "task {i}" }',
      'stages:', '  - name: upper', '    kind: cpu', '    command: [sh, -c, "tr a-z A-Z"]',
      '  - name: count', '    kind: cpu', '    command: [sh, -c, "wc -c"]', '',
    ].join('\n'));
    const blobs = `s3://${BUCKET}/e2e`;
    const env = { SMOL_HOME: home, SMOL_LEDGER: '', SMOL_BLOBS: '', ...s3.env };
    const sub = await smolRun(['rollout', 'submit', manifest, '--blobs', blobs, '--json'], env);
    expect(sub.code, sub.stderr).toBe(0);
    expect(fs.existsSync(path.join(home, 'blobs'))).toBe(false); // inputs went to S3, not beside the ledger
    // a worker pointed at the wrong bucket fails loudly as a blob-store failure and gives its leases back
    const lost = await smolRun(['worker', '--blobs', 's3://no-such-bucket/e2e', '--concurrency', '1', '--give-up-after', '1', '--exit-when-idle', '1s'], env);
    expect(lost.code, lost.stderr).toBe(69);
    expect(lost.stderr).toMatch(/reading input blob sha256:\w+ failed: .*bucket no-such-bucket does not exist.*lease released/);
    expect(lost.stderr).toContain('worker gave up after 1 infrastructure failures in a row (blob store)');
    const w = await smolRun(['worker', '--blobs', blobs, '--concurrency', '2', '--exit-when-idle', '250ms', '--json'], env);
    expect(w.code, w.stderr).toBe(0);
    const res = await smolRun(['rollout', 'results', 's3demo', '--blobs', blobs, '--json'], env);
    expect(res.code, res.stderr).toBe(0);
    const rows = JSON.parse(res.stdout) as { stage: string; output: string }[];
    expect(rows.filter((r) => r.stage === 'upper').map((r) => r.output).sort()).toEqual(['TASK 0', 'TASK 1', 'TASK 2', 'TASK 3']);
    expect(rows.filter((r) => r.stage === 'count').map((r) => r.output.trim())).toEqual(['6', '6', '6', '6']);
    const check = await smolRun(['ledger', 'check', '--blobs', blobs, '--json'], env);
    expect(check.code, check.stderr).toBe(0);
    expect(JSON.parse(check.stdout)).toMatchObject({ backend: 'sqlite', blobStore: { kind: 's3', where: `${blobs} at ${s3.endpoint}` }, issues: [] });
    // the same ledger with its blobs looked for in the wrong bucket: a blob-store failure, named, not a silent pass
    const wrong = await smolRun(['ledger', 'check', '--blobs', 's3://no-such-bucket/e2e', '--json'], env);
    expect(wrong.code).toBe(66);
    expect(JSON.parse(wrong.stderr).error.message).toContain('bucket no-such-bucket does not exist');
  }, 180_000);
});
