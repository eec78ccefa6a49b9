/**
 * Pack, images and throwaway runs through a real `smol serve`: a stopped machine packed into a .smolmachine, verified, run as a
 * throwaway, and made into a new machine with `from`; the image cache listed. One machine, never booted by the
 * pack itself (pack of a stopped machine packs its disk); answers checked against docs/openapi.json.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning } from '../../helpers/cli.js';
import { expectDocumented } from '../../helpers/openapi.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
let art: string;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- answers are checked against docs/openapi.json

async function call(method: string, template: string, pathname: string, body?: unknown) {
  const r = await request(pathname, { method, body, socket: srv.socket, timeoutMs: 300_000 });
  const json = r.json() as Json;
  expectDocumented(method, template, r.status, json);
  return { status: r.status, json };
}

beforeAll(async () => {
  srv = await startServe();
  art = path.join(srv.home, 'packed.smolmachine');
  const made = await call('POST', '/v1/machines', '/v1/machines', { name: 'src', memory: 256, workdir: '/tmp', env: { FROM_PACK: 'yes' } });
  expect(made.status, JSON.stringify(made.json)).toBe(201);
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('pack and image routes', () => {
  it('packs a stopped machine, verifies the artifact, and refuses a damaged one', async () => {
    const packed = await call('POST', '/v1/pack', '/v1/pack', { machine: 'src', output: art });
    expect(packed.status, JSON.stringify(packed.json)).toBe(201);
    expect(packed.json).toMatchObject({ path: art, signed: false, digest: expect.stringMatching(/^[0-9a-f]{64}$/) }); // as `pack create --json` prints it
    expect(packed.json.bytes).toBe(fs.statSync(art).size);
    expect((await call('POST', '/v1/pack', '/v1/pack', { machine: 'src', output: art })).status).toBe(409); // exists, no force
    const ok = await call('POST', '/v1/pack/verify', '/v1/pack/verify', { path: art });
    expect([ok.status, ok.json.ok, ok.json.failed]).toEqual([200, true, []]);
    const bad = path.join(srv.home, 'bad.smolmachine');
    const bytes = fs.readFileSync(art);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    fs.writeFileSync(bad, bytes);
    const v = await call('POST', '/v1/pack/verify', '/v1/pack/verify', { path: bad });
    expect(v.status === 200 ? v.json.ok : v.json.error.code).not.toBe(true);
    expect((await call('POST', '/v1/pack/verify', '/v1/pack/verify', { path: 'relative.smolmachine' })).status).toBe(400);
  });

  it('runs the artifact as a throwaway, and creates a machine from it with its shape and env', async () => {
    // stdin, env (added to the recorded env) and workdir as /v1/run takes them
    const run = await call('POST', '/v1/pack/run', '/v1/pack/run', { path: art, argv: ['sh', '-c', 'echo "$FROM_PACK $EXTRA $(pwd)"; cat; exit 4'], env: { EXTRA: 'x' }, workdir: '/', stdin: Buffer.from('in\n').toString('base64') });
    expect(run.status, JSON.stringify(run.json)).toBe(200);
    expect([run.json.exitCode, run.json.stdout]).toEqual([4, 'yes x /\nin\n']);
    const made = await call('POST', '/v1/machines', '/v1/machines', { name: 'copy', from: art, start: true });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    expect([made.json.memoryMiB, made.json.state]).toEqual([256, 'running']);
    const r = await call('POST', '/v1/machines/{name}/exec', '/v1/machines/copy/exec', { argv: ['sh', '-c', 'echo "$FROM_PACK $(pwd)"'] });
    expect(r.json.stdout).toBe('yes /tmp\n');
    // forkable through the API, as machine create --forkable: then a fork works
    expect(made.json.forkable).toBe(false);
    const f = await call('POST', '/v1/machines', '/v1/machines', { name: 'fk', forkable: true, start: true });
    expect([f.status, f.json.forkable]).toEqual([201, true]);
    const kids = await call('POST', '/v1/machines/{name}/fork', '/v1/machines/fk/fork', { count: 1, namePrefix: 'fkc' });
    expect([kids.status, kids.json.clones.map((c: Json) => c.state)], JSON.stringify(kids.json)).toEqual([200, ['running']]);
    for (const n of ['fkc1', 'fk']) expect((await call('DELETE', '/v1/machines/{name}', `/v1/machines/${n}?force=true`)).status).toBe(200);
    expect((await call('DELETE', '/v1/machines/{name}', '/v1/machines/copy?force=true')).json.removed).toEqual(['copy']);
  });

  it('runs a command in a throwaway machine (POST /v1/run) and leaves no machine behind', async () => {
    const r = await call('POST', '/v1/run', '/v1/run', { argv: ['sh', '-c', 'echo "$A"; cat; echo err >&2; exit 5'], env: { A: 'from-run' }, stdin: Buffer.from('in\n').toString('base64') });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json).toMatchObject({ exitCode: 5, stdout: 'from-run\nin\n', stderr: 'err\n', timedOut: false });
    const left = await call('GET', '/v1/machines', '/v1/machines');
    expect(left.json.machines.map((m: Json) => m.name)).toEqual(['src']);
    expect((await call('POST', '/v1/run', '/v1/run', { argv: [] })).status).toBe(400);
  });

  it('exposes Prometheus metrics: machines by state, boots, forks, execs, and each running machine\'s PSS', async () => {
    expect((await call('POST', '/v1/machines/{name}/start', '/v1/machines/src/start')).status).toBe(200);
    const r = await request('/metrics', { method: 'GET', socket: srv.socket });
    expect([r.status, r.headers['content-type']]).toEqual([200, expect.stringContaining('text/plain')]);
    const value = (line: RegExp) => Number(new RegExp(`^${line.source} (\\S+)$`, 'm').exec(r.text)?.[1]);
    expect(value(/smol_machines\{state="running"\}/)).toBe(1);
    expect(value(/smol_forks_total/)).toBe(1); // the one clone of the forkable machine above
    expect(value(/smol_fork_seconds_count/)).toBe(1);
    expect(value(/smol_boots_total/)).toBeGreaterThanOrEqual(3); // copy, fk, src (and the throwaway run)
    expect(value(/smol_exec_seconds_count/)).toBeGreaterThanOrEqual(2);
    expect(value(/smol_machine_memory_pss_bytes\{machine="src"\}/)).toBeGreaterThan(1024 * 1024);
    expect(r.text).toMatch(/^smol_api_requests_total\{route="\/v1\/pack",status="201"\} 1$/m);
  });

  it('lists the image cache, and answers 404 for an image it does not hold', async () => {
    const images = await call('GET', '/v1/images', '/v1/images');
    expect(images.status).toBe(200);
    expect(Array.isArray(images.json.images)).toBe(true);
    expect((await call('DELETE', '/v1/images/{ref}', `/v1/images/${encodeURIComponent('nope:latest')}`)).status).toBe(404);
  });
});
