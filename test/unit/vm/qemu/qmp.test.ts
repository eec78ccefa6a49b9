import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QmpClient, QmpError } from '../../../../src/vm/qemu/qmp.js';

/** A stand-in QMP server speaking the real wire format: greeting, capabilities mode, replies by id, events. */
function fakeQmp(sockPath: string, handle: (cmd: string, args: unknown, send: (o: unknown) => void) => void): Promise<net.Server> {
  const server = net.createServer((s) => {
    const send = (o: unknown) => s.write(JSON.stringify(o) + '\r\n');
    send({ QMP: { version: { qemu: { major: 7, minor: 2, micro: 22 }, package: '' }, capabilities: ['oob'] } });
    let buf = '';
    let negotiated = false;
    s.on('data', (d) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const msg = JSON.parse(buf.slice(0, nl)) as { execute: string; arguments?: unknown; id?: string };
        buf = buf.slice(nl + 1);
        if (!negotiated) {
          if (msg.execute !== 'qmp_capabilities') { send({ error: { class: 'CommandNotFound', desc: 'Expecting capabilities negotiation' }, id: msg.id }); continue; }
          negotiated = true;
          send({ return: {}, id: msg.id });
          continue;
        }
        handle(msg.execute, msg.arguments, (o) => send({ ...(o as object), id: msg.id }));
      }
    });
  });
  return new Promise((r) => server.listen(sockPath, () => r(server)));
}

let dir = '';
let server: net.Server | undefined;
afterEach(() => { server?.close(); rmSync(dir, { recursive: true, force: true }); });

describe('QmpClient', () => {
  it('negotiates capabilities, matches replies to commands and surfaces QMP errors', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'qmp-'));
    const sock = path.join(dir, 'qmp.sock');
    server = await fakeQmp(sock, (cmd, args, send) => {
      if (cmd === 'query-status') setTimeout(() => send({ return: { status: 'running', running: true } }), 20);
      else if (cmd === 'echo') send({ return: args });
      else send({ error: { class: 'CommandNotFound', desc: `The command ${cmd} has not been found` } });
    });
    const c = await QmpClient.connect(sock);
    expect(c.version).toEqual({ major: 7, minor: 2, micro: 22 });
    const [status, echo] = await Promise.all([c.execute('query-status'), c.execute('echo', { a: 1 })]);
    expect(status).toEqual({ status: 'running', running: true });
    expect(echo).toEqual({ a: 1 });
    const err = await c.execute('nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QmpError);
    expect((err as QmpError).qmpClass).toBe('CommandNotFound');
    c.close();
  });

  it('delivers events and fails pending commands when QEMU goes away', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'qmp-'));
    const sock = path.join(dir, 'qmp.sock');
    const conns: net.Socket[] = [];
    server = await fakeQmp(sock, (cmd, _a, send) => {
      if (cmd === 'stop') { send({ return: {} }); send({ event: 'STOP', timestamp: { seconds: 1, microseconds: 0 } }); }
    });
    server.on('connection', (s) => conns.push(s));
    const c = await QmpClient.connect(sock);
    const stopped = c.waitEvent('STOP', 2000);
    await c.execute('stop');
    expect((await stopped).event).toBe('STOP');
    const hanging = c.execute('quit');
    for (const s of conns) s.destroy();
    await expect(hanging).rejects.toThrow(/QMP connection (closed|failed)/);
  });

  it('waits for the socket to appear, then times out clearly', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'qmp-'));
    const sock = path.join(dir, 'late.sock');
    setTimeout(() => { void fakeQmp(sock, (_c, _a, send) => send({ return: {} })).then((s) => (server = s)); }, 100);
    const c = await QmpClient.connect(sock, 3000);
    c.close();
    await expect(QmpClient.connect(path.join(dir, 'never.sock'), 200)).rejects.toThrow(/not ready/);
  });
});
