import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { GuestChannelError } from '../../../src/errors/index.js';
import { AgentClient, encodeFrame, FrameDecoder, FrameType } from '../../../src/vm/agent/index.js';
import { buildAgent, connect, startAgent, type RunningAgent } from './agent-harness.js';

let agent: RunningAgent | undefined;
afterEach(async () => {
  await agent?.stop();
  agent = undefined;
});

describe('agent process failures', () => {
  it('rejects a running exec with GuestChannelError when the agent is killed', async () => {
    await buildAgent();
    agent = await startAgent();
    const client = await connect(agent);
    const s = client.exec({ argv: ['sleep', '30'] });
    await s.pid;
    const get = client.ping();
    agent.proc.kill('SIGKILL');
    await expect(s.exit).rejects.toBeInstanceOf(GuestChannelError);
    await expect(s.exit).rejects.toThrow(/closed/);
    await expect(get).rejects.toBeInstanceOf(GuestChannelError);
    expect(() => client.exec({ argv: ['true'] })).toThrow(GuestChannelError);
  });

  it('kills a disconnected host\'s processes and serves the next host', async () => {
    await buildAgent();
    agent = await startAgent();
    const first = await connect(agent);
    const s = first.exec({ argv: ['sleep', '30'] });
    const pid = await s.pid;
    first.close();
    await expect(s.exit).rejects.toThrow(/closed by the host/);
    const second: AgentClient = await connect(agent);
    // The orphaned sleep is killed when its host goes away.
    let alive = true;
    for (let i = 0; i < 100 && alive; i++) {
      alive = (await second.run({ argv: ['kill', '-0', String(pid)] })).code === 0;
      if (alive) await new Promise((r) => setTimeout(r, 20));
    }
    expect(alive).toBe(false);
    second.close();
  });

  it('answers a host that sends garbage with a protocol ERROR, drops it, and serves the next host', async () => {
    await buildAgent();
    agent = await startAgent();
    const frames = await new Promise<ReturnType<FrameDecoder['push']>>((resolve, reject) => {
      const sock = net.createConnection(agent!.socket);
      const decoder = new FrameDecoder();
      const got: ReturnType<FrameDecoder['push']> = [];
      sock.on('data', (c) => got.push(...decoder.push(c)));
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
      sock.write(encodeFrame(FrameType.exec, 0, 1, Buffer.alloc(3))); // EXEC before HELLO
    });
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ type: FrameType.error, stream: 0 });
    expect(frames[0].payload.subarray(4).toString()).toMatch(/before HELLO/);
    const client: AgentClient = await connect(agent);
    expect((await client.run({ argv: ['echo', 'ok'] })).stdout.toString()).toBe('ok\n');
    client.close();
  });
});
