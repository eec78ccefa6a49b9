/**
 * A guest that floods the agent port with frames the host answers (PING, CONNECT) and never reads the
 * answers: the host must stop reading it once its queue to the guest is full, not buffer every answer.
 * The guest is an in-process fake on a unix socket, so the host's queue (the socket's writableLength) is
 * measured directly rather than through RSS.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { AgentClient, encodeFrame, encodeHeader, FrameDecoder, FrameType, GUEST_STREAM_BIT, MAX_GUEST_STREAMS, MAX_PAYLOAD, OUTBOUND_BUDGET } from '../../../src/vm/agent/index.js';
import { encodeHello } from '../../../src/vm/agent/payloads.js';

const cleanup: Array<() => void> = [];
afterEach(() => {
  while (cleanup.length) cleanup.pop()!();
});

interface Flood { client: AgentClient; host: net.Socket; guest: net.Socket; peak: () => number }

/** A fake guest that handshakes and then stops reading; `peak` is the host's largest outbound queue seen. */
async function floodedChannel(): Promise<Flood> {
  const dir = mkdtempSync(path.join(tmpdir(), 'smol-flood-'));
  const sockPath = path.join(dir, 'g.sock');
  let guest!: net.Socket;
  const server = net.createServer((sock) => {
    guest = sock;
    sock.on('error', () => undefined);
    const decoder = new FrameDecoder();
    const onData = (c: Buffer) => {
      for (const f of decoder.push(c)) {
        if (f.type !== FrameType.hello) continue;
        const nonce = f.payload.readUInt32LE(20);
        sock.write(encodeFrame(FrameType.hello, 0, 0, encodeHello({ version: 1, capabilities: 15, maxPayload: MAX_PAYLOAD, window: 1 << 20, nonce, name: 'flood' })));
      }
    };
    sock.on('data', onData);
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  const host = net.createConnection(sockPath);
  await new Promise<void>((r, j) => host.once('connect', r).once('error', j));
  let peak = 0;
  const write = host.write.bind(host) as (chunk: Buffer) => boolean;
  host.write = ((chunk: Buffer) => {
    const ok = write(chunk);
    peak = Math.max(peak, host.writableLength);
    return ok;
  }) as typeof host.write;
  const client = await AgentClient.connect(host, { timeoutMs: 5000, helloRetryMs: 1000 });
  cleanup.push(() => {
    client.close();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  guest.removeAllListeners('data');
  guest.pause();
  return { client, host, guest, peak: () => peak };
}

/** Writes `total` bytes of `frame` repeated, ignoring back-pressure (the fake guest buffers it). */
function blast(guest: net.Socket, frame: (i: number) => Buffer, total: number): void {
  const one = frame(0).length;
  const perChunk = Math.floor((256 * 1024) / one);
  for (let i = 0; i * one < total; i += perChunk) {
    guest.write(Buffer.concat(Array.from({ length: perChunk }, (_, k) => frame(i + k))));
  }
}

/** Until the host has read everything the guest sent (the old host) or has stopped reading (a bounded one). */
async function untilHostReadAllOrPaused(f: Flood): Promise<void> {
  while (f.guest.writableLength > 0 && !f.host.isPaused() && !f.client.isClosed) await tick();
}

/** Lets the guest read again and counts the answers until `expected` bytes arrived. */
async function drainAnswers(f: Flood, expected: number): Promise<number> {
  let got = 0;
  f.guest.on('data', (c: Buffer) => (got += c.length));
  f.guest.resume();
  while (got < expected && !f.client.isClosed) await tick();
  return got;
}

const TOTAL = 24 * 1024 * 1024;

describe('a guest flooding the agent port', () => {
  it('PINGs it never reads the PONGs of: the host stops reading at its outbound budget, then catches up', async () => {
    const f = await floodedChannel();
    const ping = () => encodeFrame(FrameType.ping, 0, 0, Buffer.alloc(52, 7)); // 64 bytes in, 64 bytes of PONG out
    blast(f.guest, ping, TOTAL);
    await untilHostReadAllOrPaused(f);
    expect(f.peak()).toBeLessThanOrEqual(OUTBOUND_BUDGET + 1024 * 1024);
    // the channel was throttled, not broken: once the guest reads, every PONG arrives
    expect(await drainAnswers(f, TOTAL)).toBe(TOTAL);
    expect(f.client.isClosed).toBe(false);
    expect(f.peak()).toBeLessThanOrEqual(OUTBOUND_BUDGET + 1024 * 1024);
  });

  it('CONNECTs to a service nobody serves: each refusal is queued within the same budget', async () => {
    const f = await floodedChannel();
    const connect = (i: number) => encodeFrame(FrameType.connect, 0, (GUEST_STREAM_BIT | (i + 1)) >>> 0, Buffer.from('x'));
    const count = Math.floor(TOTAL / 4 / connect(0).length);
    blast(f.guest, connect, count * connect(0).length);
    await untilHostReadAllOrPaused(f);
    expect(f.peak()).toBeLessThanOrEqual(OUTBOUND_BUDGET + 1024 * 1024);
  });

  it('CONNECTs to a served service that it keeps open: refused past the per-channel stream limit', async () => {
    const f = await floodedChannel();
    const opened: unknown[] = [];
    f.client.onStream('svc', (s) => opened.push(s));
    const decoder = new FrameDecoder();
    const refused: string[] = [];
    f.guest.on('data', (c: Buffer) => {
      for (const fr of decoder.push(c)) if (fr.type === FrameType.error) refused.push(fr.payload.subarray(4).toString());
    });
    f.guest.resume();
    const n = 1000;
    for (let i = 1; i <= n; i++) f.guest.write(Buffer.concat([encodeHeader(FrameType.connect, 0, (GUEST_STREAM_BIT | i) >>> 0, 3), Buffer.from('svc')]));
    while (opened.length + refused.length < n && !f.client.isClosed) await tick();
    expect(opened.length).toBe(MAX_GUEST_STREAMS);
    expect(refused.length).toBe(n - opened.length);
    expect(refused[0]).toMatch(/too many open forwarded streams/);
  });
});
