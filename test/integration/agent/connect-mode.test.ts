import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AgentClient } from '../../../src/vm/agent/index.js';
import { buildPaths } from '../../../src/util/paths.js';
import { buildAgent } from './agent-harness.js';

let proc: ChildProcess | undefined;
let dir: string | undefined;
afterEach(() => {
  if (proc && proc.exitCode === null) proc.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
  proc = dir = undefined;
});

describe('agent --connect mode', () => {
  it('dials the host socket, serves it, and exits 0 when the host hangs up', async () => {
    await buildAgent();
    dir = mkdtempSync(path.join(tmpdir(), 'smol-agent-connect-'));
    const sockPath = path.join(dir, 'host.sock');
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(sockPath, r));
    const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
    proc = spawn(buildPaths.agent, ['--connect', `unix:${sockPath}`], { stdio: 'ignore' });
    const exited = new Promise<number | null>((r) => proc!.once('exit', (code) => r(code)));
    const client = await AgentClient.connect(await accepted, { timeoutMs: 5000 });
    expect((await client.run({ argv: ['echo', 'dialled'] })).stdout.toString()).toBe('dialled\n');
    client.close();
    expect(await exited).toBe(0);
    server.close();
  });
});
