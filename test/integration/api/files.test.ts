/**
 * The files routes of `smol serve` against one real machine: a file and a tree in and out, modes kept, and the
 * hostile cases: traversal in paths, a tar escaping its target, an upload over the cap, a guest file over it.
 */
import { Parser, type ReadEntry } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { craftTar } from '../../helpers/craft-tar.js';
import { killQemuMentioning } from '../../helpers/cli.js';
import { expectDocumented } from '../../helpers/openapi.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
const VM = 'files1';
const CAP = 1024 * 1024;
const F = `/v1/machines/${VM}/files`;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- answers are checked against docs/openapi.json
const q = (p: string) => encodeURIComponent(p);

async function sh(script: string): Promise<{ exitCode: number; stdout: string }> {
  const r = await request(`/v1/machines/${VM}/exec`, { method: 'POST', body: { argv: ['sh', '-c', script] }, socket: srv.socket });
  expect(r.status, r.text).toBe(200);
  return r.json() as { exitCode: number; stdout: string };
}

async function put(pathname: string, body: Buffer, type = 'application/octet-stream') {
  const r = await request(pathname, { method: 'PUT', rawBody: body, headers: { 'content-type': type }, socket: srv.socket });
  return { status: r.status, json: r.json() as Json };
}

/** The tar's members: name, type, mode, link target, contents. */
function readTar(buf: Buffer): Promise<{ path: string; type: string; mode: number; linkpath?: string; data: string }[]> {
  return new Promise((resolve, reject) => {
    const out: { path: string; type: string; mode: number; linkpath?: string; data: string }[] = [];
    const p = new Parser({ strict: true });
    p.on('entry', (e: ReadEntry) => {
      const chunks: Buffer[] = [];
      e.on('data', (c: Buffer) => chunks.push(c));
      e.on('end', () => out.push({ path: e.path.replace(/^\.\//, ''), type: e.type, mode: e.mode! & 0o7777, linkpath: e.linkpath || undefined, data: Buffer.concat(chunks).toString() }));
    });
    p.on('end', () => resolve(out));
    p.on('error', reject);
    p.end(buf);
  });
}

function getRaw(pathname: string): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return import('node:http').then((http) => new Promise((resolve, reject) => {
    http.get({ socketPath: srv.socket, path: pathname }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  }));
}

/**
 * A PUT that declares `length` bytes and sends none: the server must answer 413 from the header alone (sending
 * the body too would race its early close with an EPIPE here).
 */
function putDeclared(pathname: string, length: number): Promise<{ status: number; json: Json }> {
  return import('node:http').then((http) => new Promise((resolve, reject) => {
    const req = http.request({ socketPath: srv.socket, path: pathname, method: 'PUT', headers: { 'content-type': 'application/octet-stream', 'content-length': String(length) } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => { text += c.toString(); });
      res.on('end', () => { resolve({ status: res.statusCode!, json: JSON.parse(text) as Json }); req.destroy(); });
    });
    req.on('error', reject);
    req.flushHeaders();
  }));
}

beforeAll(async () => {
  srv = await startServe({ env: { SMOL_API_MAX_UPLOAD: String(CAP) } });
  const made = await request('/v1/machines', { method: 'POST', body: { name: VM, start: true }, socket: srv.socket });
  expect(made.status, made.text).toBe(201);
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('files routes', () => {
  it('writes a file with its mode, reads it back byte for byte, and lists it', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 10, 13, 0x80]);
    const w = await put(`${F}?path=${q('/tmp/a.bin')}&mode=0600`, bytes);
    expect(w.status, JSON.stringify(w.json)).toBe(200);
    expectDocumented('PUT', '/v1/machines/{name}/files', 200, w.json);
    expect(w.json).toEqual({ path: '/tmp/a.bin', bytes: bytes.length });
    const r = await getRaw(`${F}?path=${q('/tmp/a.bin')}`);
    expect(r.status).toBe(200);
    expect(r.headers['x-smol-mode']).toBe('0600');
    expect(r.body.equals(bytes)).toBe(true);
    expect((await sh('stat -c %a /tmp/a.bin')).stdout.trim()).toBe('600');

    const l = await request(`${F}/list?path=/tmp`, { socket: srv.socket });
    expect(l.status, l.text).toBe(200);
    expectDocumented('GET', '/v1/machines/{name}/files/list', 200, l.json());
    const entry = (l.json() as Json).entries.find((e: Json) => e.name === 'a.bin');
    expect(entry).toEqual({ name: 'a.bin', type: 'file', size: bytes.length, mode: '0600' });
  });

  it('refuses relative, `..`, NUL and over-long paths with 400 before touching the guest', async () => {
    for (const p of ['tmp/x', '/tmp/../etc/passwd', '/tmp/a\0b', `/${'a'.repeat(5000)}`]) {
      const r = await request(`${F}?path=${q(p)}`, { socket: srv.socket });
      expect(r.status, p).toBe(400);
      expectDocumented('GET', '/v1/machines/{name}/files', 400, r.json());
      expect((r.json() as Json).error.code).toBe('invalid_input');
    }
    const w = await put(`${F}?path=${q('/tmp/../../x')}`, Buffer.from('x'));
    expect(w.status).toBe(400);
    expect((await request(`${F}/list?path=${q('/nonexistent')}`, { socket: srv.socket })).status).toBe(404);
  });

  it('refuses an upload over SMOL_API_MAX_UPLOAD with 413, and a guest file over it', async () => {
    const big = await putDeclared(`${F}?path=/tmp/big`, CAP + 1);
    expect(big.status).toBe(413);
    expectDocumented('PUT', '/v1/machines/{name}/files', 413, big.json);
    expect((await sh('test -e /tmp/big; echo $?')).stdout.trim()).toBe('1');
    await sh(`head -c ${2 * CAP} /dev/zero > /tmp/guest-big`);
    const r = await request(`${F}?path=/tmp/guest-big`, { socket: srv.socket });
    expect(r.status).toBe(507);
    expect((r.json() as Json).error.message).toMatch(/larger than the server's 1048576-byte limit/);
  });

  it('unpacks a tar into a directory and packs it back out with modes and internal links kept', async () => {
    const tar = craftTar([
      { path: 'bin', type: 'Directory', mode: 0o755 },
      { path: 'bin/run', data: '#!/bin/sh\necho hi\n', mode: 0o755 },
      { path: 'conf', data: 'k=v\n', mode: 0o640 },
      { path: 'link', type: 'SymbolicLink', linkpath: 'bin/run' },
    ]);
    const up = await put(`${F}/tar?path=/srv/app`, tar, 'application/x-tar');
    expect(up.status, JSON.stringify(up.json)).toBe(200);
    expectDocumented('PUT', '/v1/machines/{name}/files/tar', 200, up.json);
    expect(up.json).toMatchObject({ path: '/srv/app', entries: 4 });
    expect((await sh('/srv/app/link')).stdout).toBe('hi\n');

    const down = await getRaw(`${F}/tar?path=/srv/app`);
    expect(down.status).toBe(200);
    expect(down.headers['content-type']).toBe('application/x-tar');
    const members = await readTar(down.body);
    const by = Object.fromEntries(members.map((m) => [m.path.replace(/\/$/, ''), m]));
    expect(by['bin/run']).toMatchObject({ type: 'File', mode: 0o755, data: '#!/bin/sh\necho hi\n' });
    expect(by.conf).toMatchObject({ mode: 0o640, data: 'k=v\n' });
    expect(by.link).toMatchObject({ type: 'SymbolicLink', linkpath: 'bin/run' });
  });

  it('refuses a tar with `../x` or an absolute symlink whole: nothing lands in the guest', async () => {
    const cases = [
      craftTar([{ path: 'ok', data: 'fine' }, { path: '../x', data: 'escaped' }]),
      craftTar([{ path: 'ok', data: 'fine' }, { path: 'etc', type: 'SymbolicLink', linkpath: '/etc' }]),
    ];
    for (const tar of cases) {
      const r = await put(`${F}/tar?path=/srv/hostile`, tar, 'application/x-tar');
      expect(r.status, JSON.stringify(r.json)).toBe(400);
      expectDocumented('PUT', '/v1/machines/{name}/files/tar', 400, r.json);
    }
    expect((await sh('ls -d /srv/hostile /srv/x 2>&1; echo $?')).stdout.trim()).toMatch(/1$/);
    const huge = await putDeclared(`${F}/tar?path=/srv/huge`, CAP + 1024);
    expect(huge.status).toBe(413);
  });
});
