import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { AgentClient } from '../../../src/vm/agent/index.js';
import { buildAgent, connect, startAgent, type RunningAgent } from './agent-harness.js';

let agent: RunningAgent;
let client: AgentClient;
const services: string[] = [];

beforeAll(async () => {
  await buildAgent();
  agent = await startAgent(['--forward', 'echo=$DIR/run/smol/echo.sock', '--forward', 'nobody=$DIR/run/smol/nobody.sock']);
  client = await connect(agent);
  client.onStream('echo', (d: Duplex) => {
    services.push('echo');
    d.pipe(d);
  });
});
afterAll(async () => {
  client?.close();
  await agent?.stop();
});

/** A guest program connecting to the forwarded socket: sends data, half-closes, collects the reply. */
function guestRoundTrip(sock: string, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const c = net.createConnection(sock);
    const chunks: Buffer[] = [];
    c.on('data', (b) => chunks.push(b));
    c.on('end', () => resolve(Buffer.concat(chunks)));
    c.on('error', reject);
    c.end(data);
  });
}

describe('guest-initiated forwarded streams', () => {
  it('echoes through a CONNECT stream to the host handler', async () => {
    const reply = await guestRoundTrip(path.join(agent.dir, 'run/smol/echo.sock'), Buffer.from('hello host'));
    expect(reply.toString()).toBe('hello host');
    expect(services).toContain('echo');
  });

  it('carries 16 MiB both ways under flow control, several connections at once', async () => {
    const payloads = Array.from({ length: 4 }, () => randomBytes(4 * 1024 * 1024));
    const replies = await Promise.all(payloads.map((p) => guestRoundTrip(path.join(agent.dir, 'run/smol/echo.sock'), p)));
    replies.forEach((r, i) => expect(r.equals(payloads[i])).toBe(true));
  });

  it('refuses a service the host does not handle by closing the guest connection', async () => {
    // The agent may close before the guest's write lands (EPIPE/ECONNRESET) or after it (EOF, no bytes).
    const reply = await guestRoundTrip(path.join(agent.dir, 'run/smol/nobody.sock'), Buffer.from('anyone?')).catch((e: NodeJS.ErrnoException) => e.code);
    expect(reply instanceof Buffer ? reply.length : reply).toSatisfy((r) => r === 0 || r === 'EPIPE' || r === 'ECONNRESET');
    expect((await client.run({ argv: ['true'] })).code).toBe(0);
  });
});
