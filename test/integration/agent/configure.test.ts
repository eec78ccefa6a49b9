import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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

  it('releases the fork point natively: writes the env file, wakes live waiters, drops the FIFOs of dead ones', async () => {
    await buildAgent();
    agent = await startAgent(['--sysroot', '$DIR/root']);
    const dir = path.join(agent.dir, 'root', 'run', 'smol', 'fork');
    const envFile = path.join(agent.dir, 'root', 'run', 'smol', 'fork.env');
    mkdirSync(dir, { recursive: true });
    mkdirSync(path.join(agent.dir, 'root', 'etc'));
    // the shape of smol-fork-ready: a FIFO named after the waiter's pid, read once, then the env file
    const waiter = spawn('sh', ['-c', `f=${dir}/wait.$$; mkfifo "$f"; read -r _ < "$f"; cat ${envFile}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    waiter.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const waited = new Promise((r) => waiter.once('exit', r));
    onTestFinished(() => { waiter.kill('SIGKILL'); });
    spawnSync('mkfifo', [path.join(dir, 'wait.999999999')]); // a waiter that died: its pid is not alive
    writeFileSync(path.join(dir, 'wait.1'), 'not a fifo');
    for (let i = 0; i < 200 && !existsSync(path.join(dir, `wait.${waiter.pid}`)); i++) await new Promise((r) => setTimeout(r, 10));
    client = await connect(agent);
    const r = await client.configure({ machineId: 'c'.repeat(32), forkRelease: { dir: '/run/smol/fork', envFile: '/run/smol/fork.env', text: "export SMOL_FORK_ROLE='clone'\n" } });
    expect(r).toEqual({ released: 1 });
    await waited;
    expect(out).toBe("export SMOL_FORK_ROLE='clone'\n");
    expect(readFileSync(envFile, 'utf8')).toBe("export SMOL_FORK_ROLE='clone'\n");
    expect(existsSync(path.join(dir, 'wait.999999999'))).toBe(false);
    expect(existsSync(path.join(dir, 'wait.1'))).toBe(true);
    expect(readFileSync(path.join(agent.dir, 'root', 'etc', 'machine-id'), 'utf8')).toBe(`${'c'.repeat(32)}\n`);
    // without a release asked for, DONE carries nothing
    expect(await client.configure({ machineId: 'd'.repeat(32) })).toEqual({ released: null });
  });

  it('volumes: rescans PCI before each mount attempt and, when the tag never mounts, says so with the bound', async () => {
    await buildAgent();
    agent = await startAgent(['--sysroot', '$DIR/root']);
    // under --sysroot even the rescan goes to a file of the test's, never the host's /sys/bus/pci/rescan;
    // the virtiofs mount itself is real and fails on a host without the device, as a guest's does before the plug
    const rescan = path.join(agent.dir, 'root', 'sys', 'bus', 'pci', 'rescan');
    mkdirSync(path.dirname(rescan), { recursive: true });
    writeFileSync(rescan, '');
    mkdirSync(path.join(agent.dir, 'root', 'etc'));
    client = await connect(agent);
    const err = await client.configure({ volumes: { tag: `smol-test-${process.pid}`, attempts: 3, readAheadKb: 8192, mounts: [{ index: 0, guest: '/w', readonly: true }] } }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/configure volumes failed: the virtiofs device did not appear within 30 ms \(mount: [^)]+\)/);
    expect(readFileSync(rescan, 'utf8')).toBe('1');
    expect(existsSync(path.join(agent.dir, 'root', 'run', 'smol', 'vol'))).toBe(true);
    expect(existsSync(path.join(agent.dir, 'root', 'w'))).toBe(false); // nothing bound after a failed mount
    // the agent goes on serving
    expect(await client.configure({ machineId: 'e'.repeat(32) })).toEqual({ released: null });
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
