/**
 * Fork and fork points through a real `smol serve`: one forkable parent (made with the CLI, as a user would),
 * one clone of it, a saved point and one clone of that; answers checked against docs/openapi.json.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, smol } from '../../helpers/cli.js';
import { expectDocumented } from '../../helpers/openapi.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
const VM = 'forkp';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- answers are checked against docs/openapi.json

async function call(method: string, template: string, pathname: string, body?: unknown) {
  const r = await request(pathname, { method, body, socket: srv.socket, timeoutMs: 300_000 });
  const json = r.json() as Json;
  expectDocumented(method, template, r.status, json);
  return { status: r.status, json };
}

async function sh(name: string, script: string): Promise<string> {
  const r = await request(`/v1/machines/${name}/exec`, { method: 'POST', body: { argv: ['sh', '-c', script] }, socket: srv.socket });
  expect(r.status, r.text).toBe(200);
  return (r.json() as { stdout: string }).stdout;
}

beforeAll(async () => {
  srv = await startServe();
  const made = await smol(['machine', 'create', VM, '--forkable', '--start'], { home: srv.home, timeoutMs: 300_000 });
  expect(made.code, made.stderr).toBe(0);
  await sh(VM, 'echo before-fork > /tmp/mark');
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('fork routes', () => {
  it('forks a running machine: the clone runs and has the parent\'s memory and disk of that moment', async () => {
    const r = await call('POST', '/v1/machines/{name}/fork', `/v1/machines/${VM}/fork`, { count: 1, namePrefix: 'kid' });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json.failed).toEqual([]);
    expect(r.json.clones.map((c: Json) => [c.name, c.state, c.parent])).toEqual([['kid1', 'running', VM]]);
    expect(await sh('kid1', 'cat /tmp/mark')).toBe('before-fork\n');
    expect((await call('POST', '/v1/machines/{name}/fork', '/v1/machines/nope/fork', {})).status).toBe(404);
    expect((await call('POST', '/v1/machines/{name}/fork', `/v1/machines/${VM}/fork`, { count: 65 })).status).toBe(400);
  });

  it('saves a point, lists it, clones it by exact name, and refuses to remove it while used', async () => {
    const saved = await call('POST', '/v1/machines/{name}/points', `/v1/machines/${VM}/points`, { name: 'p1' });
    expect(saved.status, JSON.stringify(saved.json)).toBe(201);
    expect(saved.json).toMatchObject({ point: 'p1', machine: VM });
    const list = await call('GET', '/v1/points', '/v1/points');
    expect(list.json.points.map((p: Json) => p.name)).toEqual(['p1']);
    const clones = await call('POST', '/v1/points/{point}/fork', '/v1/points/p1/fork', { names: ['pc1'] });
    expect(clones.status, JSON.stringify(clones.json)).toBe(200);
    expect(clones.json.clones.map((c: Json) => c.name)).toEqual(['pc1']);
    expect(await sh('pc1', 'cat /tmp/mark')).toBe('before-fork\n');
    const busy = await call('DELETE', '/v1/points/{point}', '/v1/points/p1');
    expect(busy.status).toBe(409);
    const forced = await call('DELETE', '/v1/points/{point}', '/v1/points/p1?force=true');
    expect(forced.json).toMatchObject({ point: 'p1', freed: false, clones: expect.arrayContaining([expect.any(String)]) });
    expect((await call('POST', '/v1/points/{point}/fork', '/v1/points/p1/fork', {})).status).toBe(404);
  });
});
