/**
 * `smol serve` end to end: a real server subprocess on a scratch home, one real machine for the whole file,
 * raw HTTP over the Unix socket and TCP, every JSON answer checked against docs/openapi.json.
 */
import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, smol } from '../../helpers/cli.js';
import { expectDocumented } from '../../helpers/openapi.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
const VM = 'api1';

/** A request over the socket whose JSON answer must match the document. */
async function call(method: string, template: string, pathname: string, body?: unknown) {
  const r = await request(pathname, { method, body, socket: srv.socket });
  const json = r.json();
  expectDocumented(method, template, r.status, json);
  return { status: r.status, json: json as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any -- answers are checked against the document just above
}

const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${srv.pid}/status`, 'utf8'))![1]) * 1024;
const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${srv.pid}/status`, 'utf8'))![1]) * 1024;

beforeAll(async () => {
  srv = await startServe({ tcp: true });
  const made = await call('POST', '/v1/machines', '/v1/machines', { name: VM, start: true, labels: { team: 'a' } });
  expect(made.status, JSON.stringify(made.json)).toBe(201);
  expect(made.json.state).toBe('running');
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('smol serve', () => {
  it('answers health without a token and refuses TCP requests without the right one', async () => {
    expect((await call('GET', '/v1/health', '/v1/health')).json).toMatchObject({ ok: true });
    expect((await request('/v1/health', { url: srv.url! })).status).toBe(200);
    const none = await request('/v1/machines', { url: srv.url! });
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expectDocumented('GET', '/v1/machines', 401, none.json());
    expect((await request('/v1/machines', { url: srv.url!, headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status).toBe(401);
    const ok = await request('/v1/machines', { url: srv.url!, headers: { authorization: `Bearer ${srv.token}` } });
    expect(ok.status).toBe(200);
  });

  it('serves its own OpenAPI document, the checked-in one', async () => {
    const doc = await request('/v1/openapi.json', { method: 'GET', socket: srv.socket });
    expect(doc.status).toBe(200);
    expect(doc.json()).toEqual(JSON.parse(fs.readFileSync('docs/openapi.json', 'utf8')));
  });

  it('refuses --listen on a non-loopback address without a token file', async () => {
    const r = await smol(['serve', '--socket', `${srv.home}/other.sock`, '--listen', '0.0.0.0:0'], { home: srv.home });
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('without tokens');
  });

  it('lists and gets the machine, and the CLI sees the API\'s machine and the API the CLI\'s', async () => {
    const list = await call('GET', '/v1/machines', `/v1/machines?label=team=a&state=running`);
    expect(list.json.machines.map((m: { name: string }) => m.name)).toEqual([VM]);
    expect((await call('GET', '/v1/machines', '/v1/machines?label=team=b')).json.machines).toEqual([]);
    expect((await call('GET', '/v1/machines/{name}', `/v1/machines/${VM}`)).json.name).toBe(VM);
    expect((await call('GET', '/v1/machines/{name}', '/v1/machines/nope')).status).toBe(404);
    const cli = await smol(['machine', 'ls', '--json'], { home: srv.home });
    expect(JSON.parse(cli.stdout).map((m: { name: string }) => m.name)).toContain(VM);
    expect((await smol(['machine', 'create', 'fromcli'], { home: srv.home })).code).toBe(0);
    expect((await call('GET', '/v1/machines/{name}', '/v1/machines/fromcli')).json.state).toBe('stopped');
    expect((await call('DELETE', '/v1/machines/{name}', '/v1/machines/fromcli')).json.removed).toEqual(['fromcli']);
  });

  it('answers a malformed body with 400 and the field paths, and makes nothing', async () => {
    const bad = await call('POST', '/v1/machines', '/v1/machines', { name: 'bad1', cpus: 'many', ports: ['nope'] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_input');
    expect(bad.json.error.issues.map((i: { path: string }) => i.path)).toEqual(expect.arrayContaining(['cpus', 'ports.0']));
    const notJson = await request('/v1/machines', { method: 'POST', rawBody: '{"name":', socket: srv.socket });
    expect(notJson.status).toBe(400);
    expect((await call('GET', '/v1/machines/{name}', '/v1/machines/bad1')).status).toBe(404);
    // from: an artifact path, refused with the CLI's error when it is not one; from and image together are ambiguous
    const both = await call('POST', '/v1/machines', '/v1/machines', { name: 'bad2', from: '/nonexistent/x.smolmachine', image: 'alpine' });
    expect([both.status, both.json.error.where]).toEqual([400, 'from']);
    const missing = await call('POST', '/v1/machines', '/v1/machines', { name: 'bad3', from: '/nonexistent/x.smolmachine' });
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(missing.json.error.message).toContain('/nonexistent/x.smolmachine');
    for (const n of ['bad2', 'bad3']) expect((await call('GET', '/v1/machines/{name}', `/v1/machines/${n}`)).status).toBe(404);
  });

  it('runs a buffered exec with capped output', async () => {
    const r = await call('POST', '/v1/machines/{name}/exec', `/v1/machines/${VM}/exec`, { argv: ['sh', '-c', 'echo hi; echo oops >&2; head -c 5000 /dev/zero; exit 3'], maxOutputBytes: 100 });
    expect(r.json).toMatchObject({ exitCode: 3, stdoutTruncated: true, stderr: 'oops\n', stderrTruncated: false });
    expect(r.json.stdout.startsWith('hi\n')).toBe(true);
    expect(r.json.stdout.length).toBe(100);
  });

  it('streams 64 MiB over SSE with the server\'s memory bounded, and holds the guest back while the client does not read', async () => {
    const before = hwm();
    let bytes = 0;
    let exit: unknown;
    let pausedGrowth = -1;
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ socketPath: srv.socket, path: `/v1/machines/${VM}/exec/stream`, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => {
          // once, after 4 MiB: stop reading for 2 s. A server without backpressure would take in what the guest
          // sends meanwhile (tens of MiB); with it, the server's RSS stays put while nothing is read
          if (pausedGrowth < 0 && bytes > 4 * 1024 * 1024) {
            pausedGrowth = 0;
            res.pause();
            setTimeout(() => {
              const at = rss();
              setTimeout(() => { pausedGrowth = rss() - at; res.resume(); }, 2000);
            }, 300);
          }
          buf += s;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const [ev, data] = buf.slice(0, i).split('\n').map((l) => l.slice(l.indexOf(':') + 2));
            buf = buf.slice(i + 2);
            if (ev === 'stdout') bytes += Buffer.from((JSON.parse(data) as { data: string }).data, 'base64').length;
            if (ev === 'exit') exit = JSON.parse(data);
          }
        });
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ argv: ['head', '-c', String(64 * 1024 * 1024), '/dev/zero'] }));
    });
    expect(bytes).toBe(64 * 1024 * 1024);
    expect(exit).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect(pausedGrowth).toBeGreaterThanOrEqual(0);
    expect(pausedGrowth).toBeLessThan(8 * 1024 * 1024);
    // the whole stream: transient buffers and the garbage collector's lag, never the stream (85 MiB as base64)
    expect(hwm() - before).toBeLessThan(48 * 1024 * 1024);
  });

  it('kills the guest command when a streaming client disconnects', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ socketPath: srv.socket, path: `/v1/machines/${VM}/exec/stream`, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.once('data', () => { req.destroy(); resolve(); });
      });
      req.on('error', (e) => (req.destroyed ? undefined : reject(e)));
      req.end(JSON.stringify({ argv: ['sh', '-c', 'echo started; exec sleep 1000'] }));
    });
    let left = '';
    for (let i = 0; i < 50; i++) {
      left = (await call('POST', '/v1/machines/{name}/exec', `/v1/machines/${VM}/exec`, { argv: ['sh', '-c', 'ps -o args | grep "[s]leep 1000" || true'] })).json.stdout;
      if (!left) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(left).toBe('');
  });

  it('stops and removes the machine', async () => {
    expect((await call('POST', '/v1/machines/{name}/stop', `/v1/machines/${VM}/stop`, {})).json.state).toBe('stopped');
    expect((await call('DELETE', '/v1/machines/{name}', `/v1/machines/${VM}`)).json.removed).toEqual([VM]);
    expect((await call('GET', '/v1/machines', '/v1/machines')).json.machines).toEqual([]);
  });
});
