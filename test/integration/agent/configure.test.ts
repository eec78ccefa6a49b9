import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { AgentClient } from '../../../src/vm/agent/index.js';
import { buildAgent, connect, startAgent, type RunningAgent } from './agent-harness.js';

// Setting the hostname must not touch the host running the tests: only inside a new UTS namespace.
const canUnshareUts = process.platform === 'linux' && spawnSync('unshare', ['--uts', 'true']).status === 0;

let agent: RunningAgent | undefined;
let client: AgentClient | undefined;
afterEach(async () => {
  client?.close();
  await agent?.stop();
  agent = client = undefined;
});

describe('agent CONFIGURE and SHUTDOWN', () => {
  it('writes machine-id under --sysroot and mixes entropy into the RNG', async () => {
    await buildAgent();
    agent = await startAgent(['--sysroot', '$DIR/root']);
    mkdirSync(path.join(agent.dir, 'root', 'etc'), { recursive: true });
    client = await connect(agent);
    await client.configure({ machineId: 'a'.repeat(32), entropy: randomBytes(64) });
    expect(readFileSync(path.join(agent.dir, 'root', 'etc', 'machine-id'), 'utf8')).toBe(`${'a'.repeat(32)}\n`);
  });

  it('reports a failing key as an error naming it', async () => {
    await buildAgent();
    agent = await startAgent(['--sysroot', '$DIR/missing']);
    client = await connect(agent);
    await expect(client.configure({ machineId: 'b'.repeat(32) })).rejects.toThrow(/machine-id/);
  });

  it.skipIf(!canUnshareUts)('sets the hostname (skipped where unshare --uts is not permitted: it would rename the host)', async () => {
    await buildAgent();
    agent = await startAgent(['--sysroot', '$DIR'], ['unshare', '--uts']);
    client = await connect(agent);
    await client.configure({ hostname: 'smol-fork-7' });
    expect((await client.run({ argv: ['hostname'] })).stdout.toString()).toBe('smol-fork-7\n');
  });

  it('SHUTDOWN acknowledges, then a non-PID-1 agent exits', async () => {
    await buildAgent();
    agent = await startAgent();
    client = await connect(agent);
    const exited = new Promise((r) => agent!.proc.once('exit', (code) => r(code)));
    await client.shutdown();
    expect(await exited).toBe(0);
    expect((await client.closed).message).toMatch(/closed/);
  });
});
