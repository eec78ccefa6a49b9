/** A fake guest (a tiny unix-socket server) that speaks just enough protocol, then misbehaves. */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GuestChannelError } from '../../../src/errors/index.js';
import { AgentClient, encodeFrame, FrameDecoder, FrameType, MAX_PAYLOAD } from '../../../src/vm/agent/index.js';
import { encodeHello } from '../../../src/vm/agent/payloads.js';

type Script = (sock: net.Socket, firstStream: Promise<number>) => void;
interface FakeOptions { raw?: boolean; window?: number; timeoutMs?: number; helloRetryMs?: number; answer?: (nonce: number, sock: net.Socket) => void }

const cleanup: Array<() => void> = [];
afterEach(() => {
  while (cleanup.length) cleanup.pop()!();
});

const hello = (nonce = 1) => encodeFrame(FrameType.hello, 0, 0, encodeHello({ version: 1, capabilities: 15, maxPayload: MAX_PAYLOAD, window: 1 << 20, nonce, name: 'fake' }));

/** Starts a fake guest running `script` after answering HELLO (unless raw), and connects a client. */
async function fakeGuest(script: Script, opts: FakeOptions = {}): Promise<AgentClient> {
  const dir = mkdtempSync(path.join(tmpdir(), 'smol-fake-guest-'));
  const sockPath = path.join(dir, 'g.sock');
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    const decoder = new FrameDecoder();
    let firstStream!: (id: number) => void;
    const stream = new Promise<number>((r) => (firstStream = r));
    sock.on('data', (c) => {
      for (const f of decoder.push(c)) {
        if (f.type === FrameType.hello && !opts.raw) {
          const nonce = f.payload.readUInt32LE(20);
          if (opts.answer) opts.answer(nonce, sock);
          else sock.write(hello(nonce));
        }
        if (f.stream !== 0) firstStream(f.stream);
      }
    });
    script(sock, stream);
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  cleanup.push(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const client = await AgentClient.connectUnix(sockPath, { timeoutMs: opts.timeoutMs ?? 2000, window: opts.window, helloRetryMs: opts.helloRetryMs });
  cleanup.push(() => client.close());
  return client;
}

/** Starts an exec, lets the fake guest misbehave, and expects a GuestChannelError everywhere. */
async function expectChannelError(misbehave: (sock: net.Socket, id: number) => void, pattern: RegExp, opts: { window?: number } = {}) {
  const client = await fakeGuest((sock, first) => void first.then((id) => misbehave(sock, id)), opts);
  const s = client.exec({ argv: ['anything'] });
  // Nobody listens for 'error' on stdout here: a broken guest must not crash the host.
  await expect(s.exit).rejects.toBeInstanceOf(GuestChannelError);
  await expect(s.exit).rejects.toThrow(pattern);
  expect(client.isClosed).toBe(true);
  expect((await client.closed).exitCode).toBe(72);
}

const exitPayload = (code: number) => {
  const b = Buffer.alloc(8);
  b.writeInt32LE(code, 0);
  return b;
};
const started = (id: number) => encodeFrame(FrameType.started, 0, id, Buffer.from([1, 0, 0, 0]));

describe('a misbehaving guest', () => {
  it('garbage instead of HELLO fails the handshake (after the deadline, or at once past 1 MiB)', async () => {
    await expect(fakeGuest((sock) => sock.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')), { raw: true, timeoutMs: 300 })).rejects.toBeInstanceOf(GuestChannelError);
    await expect(fakeGuest((sock) => sock.write(Buffer.alloc(2 * 1024 * 1024, 0x41)), { raw: true })).rejects.toThrow(/no HELLO from the agent in the first/);
  });

  it('skips stale bytes a serial port kept from an earlier host, up to the HELLO', async () => {
    const stale = Buffer.concat([Buffer.from([7, 0, 0]), encodeFrame(FrameType.exit, 0, 3, exitPayload(0)), Buffer.from('SMOL')]);
    const client = await fakeGuest((sock) => {
      // Split inside the HELLO so the scan has to carry a partial header across chunks.
      const bytes = Buffer.concat([stale, hello()]);
      sock.write(bytes.subarray(0, stale.length + 7));
      setTimeout(() => sock.write(bytes.subarray(stale.length + 7)), 20);
    }, { raw: true });
    expect(client.hello.name).toBe('fake');
  });

  it('a silent guest times out the handshake', async () => {
    await expect(fakeGuest(() => undefined, { raw: true, timeoutMs: 200 })).rejects.toThrow(/no HELLO.*200 ms/);
  });

  it('resends an unanswered HELLO (one swallowed on a serial port) and handshakes on the answer', async () => {
    const client = await fakeGuest(() => undefined, { helloRetryMs: 50, answer: (nonce, sock) => void (nonce >= 3 && sock.write(hello(nonce))) });
    expect(client.hello.nonce).toBeGreaterThanOrEqual(3);
  });

  it('resends a lost first HELLO at once, not only after the 1 s retry period', async () => {
    // an idle serial port loses about one first HELLO in 30; the first resend comes after 25 ms
    const client = await fakeGuest(() => undefined, { timeoutMs: 500, answer: (nonce, sock) => void (nonce >= 2 && sock.write(hello(nonce))) });
    expect(client.hello.nonce).toBe(2);
  });

  it('ignores late answers to HELLOs it has since resent', async () => {
    const client = await fakeGuest(
      (sock, first) =>
        void first.then((id) => {
          const done = Buffer.concat([started(id), encodeFrame(FrameType.eof, 1, id), encodeFrame(FrameType.eof, 2, id), encodeFrame(FrameType.exit, 0, id, exitPayload(0))]);
          sock.write(done);
        }),
      {
        helloRetryMs: 50,
        // From the second HELLO on, the answer to the previous one arrives late, just before the right one.
        answer: (nonce, sock) => void (nonce >= 2 && sock.write(Buffer.concat([hello(nonce - 1), hello(nonce)]))),
      },
    );
    expect(client.hello.nonce).toBeGreaterThanOrEqual(2);
    expect((await client.run({ argv: ['x'] })).code).toBe(0);
  });

  it('a HELLO with another protocol version is refused', async () => {
    const bad = encodeFrame(FrameType.hello, 0, 0, encodeHello({ version: 99, capabilities: 0, maxPayload: MAX_PAYLOAD, window: 1 << 20, nonce: 1, name: 'x' }));
    await expect(fakeGuest((sock) => sock.write(bad), { raw: true })).rejects.toThrow(/protocol 99/);
  });

  it('an oversize length field', async () => {
    await expectChannelError((sock) => {
      const h = Buffer.alloc(12);
      h.writeUInt32LE(MAX_PAYLOAD + 1, 0);
      h.writeUInt8(FrameType.data, 4);
      sock.write(h);
    }, /exceeds/);
  });

  it('an unknown frame type', async () => {
    await expectChannelError((sock, id) => {
      const f = encodeFrame(FrameType.data, 1, id, Buffer.from('x'));
      f.writeUInt8(200, 4);
      sock.write(f);
    }, /unknown frame type 200/);
  });

  it('a frame for a stream that was never opened', async () => {
    await expectChannelError((sock) => sock.write(encodeFrame(FrameType.data, 1, 99, Buffer.from('x'))), /unknown stream 99/);
  });

  it('data beyond the granted window', async () => {
    await expectChannelError((sock, id) => {
      sock.write(started(id));
      sock.write(encodeFrame(FrameType.data, 1, id, Buffer.alloc(65536 + 1)));
    }, /beyond the granted window/, { window: 65536 });
  });

  it('EXIT before STARTED and a short EXIT payload', async () => {
    await expectChannelError((sock, id) => sock.write(encodeFrame(FrameType.exit, 0, id, exitPayload(0))), /EXIT before STARTED/);
    const client = await fakeGuest((sock, first) => void first.then((id) => sock.write(encodeFrame(FrameType.exit, 0, id, exitPayload(0)))));
    await expect(client.exec({ argv: ['x'] }).pid).rejects.toBeInstanceOf(GuestChannelError);
    await expectChannelError((sock, id) => {
      sock.write(started(id));
      sock.write(encodeFrame(FrameType.exit, 0, id, Buffer.alloc(3)));
    }, /EXIT payload has 3 bytes/);
  });

  it('a frame type that makes no sense for the stream', async () => {
    await expectChannelError((sock, id) => sock.write(encodeFrame(FrameType.info, 0, id, Buffer.alloc(12))), /unexpected frame type 15/);
  });

  it('a PONG nobody asked for and a second HELLO', async () => {
    await expectChannelError((sock) => sock.write(encodeFrame(FrameType.pong, 0, 0, Buffer.alloc(8))), /PONG without a PING/);
    await expectChannelError((sock) => sock.write(hello()), /second HELLO/);
  });

  it('the guest closing mid-exec rejects with a channel-closed error', async () => {
    await expectChannelError((sock, id) => {
      sock.write(started(id));
      sock.write(encodeFrame(FrameType.data, 1, id, Buffer.from('partial output')));
      setTimeout(() => sock.destroy(), 20);
    }, /closed/);
  });

  it('a well-behaved exchange still works (the fake speaks the protocol)', async () => {
    const client = await fakeGuest((sock, first) =>
      void first.then((id) => {
        sock.write(Buffer.concat([started(id), encodeFrame(FrameType.data, 1, id, Buffer.from('hi')), encodeFrame(FrameType.eof, 1, id), encodeFrame(FrameType.eof, 2, id), encodeFrame(FrameType.exit, 0, id, exitPayload(5))]));
      }),
    );
    const r = await client.run({ argv: ['x'] });
    expect(r).toMatchObject({ code: 5, signal: null });
    expect(r.stdout.toString()).toBe('hi');
  });
});
