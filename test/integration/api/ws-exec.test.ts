/**
 * Interactive exec over a WebSocket against a real `smol serve` and one machine: stdin, eof, both output
 * streams, a terminal's size, a signal, errors before the upgrade, and a client that vanishes mid-command.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { killQemuMentioning } from '../../helpers/cli.js';
import { expectDocumented } from '../../helpers/openapi.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
const VM = 'ws1';

function open(argv: string[], extra = '', opts: WebSocket.ClientOptions = {}): WebSocket {
  const qs = argv.map((a) => `argv=${encodeURIComponent(a)}`).join('&') + extra;
  return new WebSocket(`ws+unix://${srv.socket}:/v1/machines/${VM}/exec/ws?${qs}`, opts);
}

/** Polls the guest until `pid` is gone (10 s at most); false if it still runs. */
async function diedInGuest(pid: string): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if ((await sh(`kill -0 ${pid} 2>/dev/null && echo alive || true`)) !== 'alive\n') return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

interface Session { out: string; err: string; exit: Record<string, unknown> | null; closeCode: number }

/** Everything a session sends until it closes. */
function collect(ws: WebSocket): Promise<Session> {
  const s: Session = { out: '', err: '', exit: null, closeCode: 0 };
  ws.on('message', (data: Buffer, binary: boolean) => {
    if (!binary) { s.exit = JSON.parse(data.toString()) as Record<string, unknown>; return; }
    if (data[0] === 1) s.out += data.subarray(1).toString();
    else if (data[0] === 2) s.err += data.subarray(1).toString();
  });
  return new Promise((resolve, reject) => {
    ws.on('close', (code) => { s.closeCode = code; resolve(s); });
    ws.on('error', reject);
  });
}

async function sh(script: string): Promise<string> {
  const r = await request(`/v1/machines/${VM}/exec`, { method: 'POST', body: { argv: ['sh', '-c', script] }, socket: srv.socket });
  expect(r.status, r.text).toBe(200);
  return (r.json() as { stdout: string }).stdout;
}

beforeAll(async () => {
  // a short heartbeat, so a client that stops answering pings is seen within the test
  srv = await startServe({ env: { SMOL_API_WS_PING_MS: '1000' } });
  const made = await request('/v1/machines', { method: 'POST', body: { name: VM, start: true }, socket: srv.socket });
  expect(made.status, made.text).toBe(201);
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('exec over a WebSocket', () => {
  it('passes stdin through to eof, prefixes stdout and stderr, and ends with exit then close 1000', async () => {
    const ws = open(['sh', '-c', 'cat; echo oops >&2; exit 3']);
    const done = collect(ws);
    ws.on('open', () => { ws.send(Buffer.from('hello\n')); ws.send(JSON.stringify({ type: 'eof' })); });
    const s = await done;
    expect(s).toEqual({ out: 'hello\n', err: 'oops\n', exit: { type: 'exit', exitCode: 3, signal: null }, closeCode: 1000 });
  });

  it('runs under a terminal of the asked size, resized on request', async () => {
    const ws = open(['sh', '-c', 'stty size; read x; stty size'], '&tty=1&rows=33&cols=77');
    const done = collect(ws);
    let sent = false;
    ws.on('message', (data: Buffer) => {
      // resized once the first size is out, so the two lines can only differ by the resize
      if (sent || !data.toString().includes('33 77')) return;
      sent = true;
      ws.send(JSON.stringify({ type: 'resize', rows: 40, cols: 100 }));
      ws.send(Buffer.from('go\r'));
    });
    const s = await done;
    expect(s.out).toMatch(/33 77[\s\S]*40 100/);
    expect(s.exit).toMatchObject({ exitCode: 0 });
  });

  it('forwards a signal to the command', async () => {
    const ws = open(['sleep', '1000']);
    const done = collect(ws);
    ws.on('open', () => setTimeout(() => ws.send(JSON.stringify({ type: 'signal', signal: 'SIGTERM' })), 500));
    expect((await done).exit).toEqual({ type: 'exit', exitCode: 143, signal: 'SIGTERM' });
  });

  it('kills the guest command when the client goes away', async () => {
    const ws = open(['sh', '-c', 'echo $$ > /tmp/ws.pid; echo started; exec sleep 1000']);
    await new Promise<void>((resolve, reject) => { ws.on('message', () => resolve()); ws.on('error', reject); });
    const pid = (await sh('cat /tmp/ws.pid')).trim();
    expect(await sh(`kill -0 ${pid} && echo alive`)).toBe('alive\n');
    ws.terminate();
    let alive = true;
    for (let i = 0; i < 50 && alive; i++) {
      alive = (await sh(`kill -0 ${pid} 2>/dev/null && echo alive || true`)) === 'alive\n';
      if (alive) await new Promise((r) => setTimeout(r, 200));
    }
    expect(alive).toBe(false);
  });

  it('answers errors before the upgrade as HTTP, in the error shape', async () => {
    const status = await new Promise<{ code: number; body: string }>((resolve) => {
      const ws = new WebSocket(`ws+unix://${srv.socket}:/v1/machines/nope/exec/ws?argv=true`);
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => { body += c.toString(); });
        res.on('end', () => resolve({ code: res.statusCode!, body }));
      });
    });
    expect(status.code).toBe(404);
    expectDocumented('GET', '/v1/machines/{name}/exec/ws', 404, JSON.parse(status.body));
    const noArgv = await request(`/v1/machines/${VM}/exec/ws`, { socket: srv.socket, headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
    expect(noArgv.status).toBe(400);
    expect((await request(`/v1/machines/${VM}/exec/ws?argv=true`, { socket: srv.socket })).status).toBe(426);
  });

  it('survives stdin sent after eof (a hostile client must not stop the server)', async () => {
    const ws = open(['sh', '-c', 'cat; echo done']);
    const done = collect(ws);
    ws.on('open', () => { ws.send(Buffer.from('a\n')); ws.send(JSON.stringify({ type: 'eof' })); ws.send(Buffer.from('after eof\n')); });
    const s = await done;
    expect(s.out).toBe('a\ndone\n');
    expect((await request('/v1/health', { socket: srv.socket })).status).toBe(200);
  });

  it('ends a session whose command leaves more than 8 MiB of stdin unread, and kills the command', async () => {
    const ws = open(['sleep', '600']);
    const done = collect(ws);
    ws.on('open', () => { for (let i = 0; i < 12; i++) ws.send(Buffer.alloc(1024 * 1024, 0x61)); });
    const s = await done;
    expect(s.closeCode).toBe(1009);
    expect(s.exit).toMatchObject({ type: 'error', error: { where: 'stdin', message: expect.stringContaining('8 MiB of stdin unread') } });
    expect((await request('/v1/health', { socket: srv.socket })).status).toBe(200);
    let left = 'sleep';
    for (let i = 0; i < 50 && left; i++) left = await sh('ps -o args | grep "[s]leep 600" || true');
    expect(left).toBe('');
  });

  it('terminates a client that stops answering pings, and kills its command', async () => {
    const ws = open(['sh', '-c', 'echo $$ > /tmp/hb.pid; echo started; exec sleep 1000'], '', { autoPong: false });
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => { ws.once('message', () => resolve()); ws.on('error', reject); });
    const pid = (await sh('cat /tmp/hb.pid')).trim();
    expect(await closed).toBe(1006);
    expect(await diedInGuest(pid)).toBe(true);
  });
});
