import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TransferError, getBlob } from '../../../src/registry/blob-get.js';

/** A raw TCP server that answers each connection with exactly these byte pieces (then closes, or not). */
async function rawServer(pieces: Buffer[], o: { close?: boolean; gapMs?: number } = {}): Promise<{ url: URL; requests: string[]; stop(): Promise<void> }> {
  const requests: string[] = [];
  const server = net.createServer((sock) => {
    let req = '';
    sock.on('data', (d: Buffer) => {
      req += d.toString('latin1');
      if (!req.includes('\r\n\r\n')) return;
      requests.push(req);
      void (async () => {
        for (const p of pieces) { sock.write(p); if (o.gapMs) await new Promise((r) => setTimeout(r, o.gapMs)); }
        if (o.close !== false) sock.end(); else sock.destroy();
      })();
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return { url: new URL(`http://127.0.0.1:${port}/v2/x/blobs/sha256:abc?y=1`), requests, stop: () => new Promise((r) => server.close(() => r())) };
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** Splits a buffer into pieces of awkward sizes, so heads and chunk lines straddle reads. */
const shred = (b: Buffer, sizes = [1, 7, 13, 3, 4096, 2]) => { const out: Buffer[] = []; for (let i = 0, k = 0; i < b.length; k++) { const n = sizes[k % sizes.length]; out.push(b.subarray(i, i + n)); i += n; } return out; };

let stops: (() => Promise<void>)[] = [];
afterEach(async () => { for (const s of stops) await s(); stops = []; });

async function fetchAll(pieces: Buffer[], o?: { close?: boolean; gapMs?: number }) {
  const srv = await rawServer(pieces, o);
  stops.push(srv.stop);
  const got: Buffer[] = [];
  const res = await getBlob(srv.url, { headers: { authorization: 'Bearer t' }, onBody: (c) => got.push(Buffer.from(c)) });
  return { res, body: Buffer.concat(got), requests: srv.requests };
}

describe('getBlob', () => {
  const body = randomBytes(300_000);

  it('reads a Content-Length body and stops at its length, sending the path, query and headers', async () => {
    const head = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`);
    const r = await fetchAll([...shred(head), body, Buffer.from('GARBAGE AFTER THE BODY')]);
    expect(r.res.status).toBe(200);
    expect(r.res.bytes).toBe(body.length);
    expect(sha(r.body)).toBe(sha(body));
    expect(r.requests[0]).toMatch(/^GET \/v2\/x\/blobs\/sha256:abc\?y=1 HTTP\/1\.1\r\n/);
    expect(r.requests[0]).toContain('\r\nauthorization: Bearer t\r\n');
  });

  it('decodes a chunked body with extensions and trailers, split at any byte', async () => {
    const parts = [body.subarray(0, 1), body.subarray(1, 70_000), body.subarray(70_000)];
    const wire = Buffer.concat([
      Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'),
      ...parts.flatMap((p, i) => [Buffer.from(`${p.length.toString(16)}${i === 1 ? ';ext=1' : ''}\r\n`), p, Buffer.from('\r\n')]),
      Buffer.from('0\r\nX-Trailer: yes\r\n\r\n'),
    ]);
    const r = await fetchAll(shred(wire), { close: false });
    expect(r.res.bytes).toBe(body.length);
    expect(sha(r.body)).toBe(sha(body));
  });

  it('reads a body delimited by the connection closing', async () => {
    const r = await fetchAll([Buffer.from('HTTP/1.0 200 OK\r\n\r\n'), body]);
    expect(sha(r.body)).toBe(sha(body));
  });

  it('returns a non-200 status with the start of its body, and no body bytes', async () => {
    const text = '{"errors":[{"code":"BLOB_UNKNOWN"}]}';
    const r = await fetchAll([Buffer.from(`HTTP/1.1 404 Not Found\r\nContent-Length: ${text.length}\r\nX-A: 1\r\nx-a: 2\r\n\r\n${text}`)]);
    expect(r.res).toMatchObject({ status: 404, bytes: 0, text });
    expect(r.res.headers['x-a']).toBe('1, 2');
    expect(r.body.length).toBe(0);
  });

  it('fails with a TransferError when the connection ends before Content-Length bytes', async () => {
    await expect(fetchAll([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body.subarray(0, 1000)]))
      .rejects.toThrow(TransferError);
    await expect(fetchAll([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc')])).rejects.toThrow(/closed the connection/);
    await expect(fetchAll([Buffer.from('SSH-2.0-OpenSSH\r\n\r\n')])).rejects.toThrow(/did not answer with HTTP/);
  });

  it('aborts with the error onBody throws', async () => {
    const srv = await rawServer([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
    stops.push(srv.stop);
    await expect(getBlob(srv.url, { headers: {}, onBody: () => { throw new Error('too big'); } })).rejects.toThrow('too big');
  });
});
