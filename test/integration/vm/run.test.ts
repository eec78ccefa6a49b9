import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol, smolSpawn } from '../../helpers/cli.js';

let home: string;
beforeAll(() => { home = scratchHome('run'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

describe('smol run (real QEMU)', () => {
  it('passes the exit code through and keeps stdout and stderr apart', async () => {
    const r = await smol(['run', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3'], { home });
    expect(r.stderr).toContain('err\n');
    expect(r.stdout).toBe('out\n');
    expect(r.code).toBe(3);
    expect(r.stderr).not.toContain('out');
  });

  it('forwards piped stdin', async () => {
    const r = await smol(['run', '--', 'cat'], { home, input: 'hi from the host\n' });
    expect(r.stdout).toBe('hi from the host\n');
    expect(r.code).toBe(0);
  });

  it('applies -e and -w', async () => {
    const r = await smol(['run', '-e', 'FOO=bar baz', '-w', '/tmp', '--', 'sh', '-c', 'echo "$FOO"; pwd'], { home });
    expect(r.stdout).toBe('bar baz\n/tmp\n');
  });

  it('gives a guest without --net no interface but lo and no route out', async () => {
    const r = await smol(['run', '--', 'sh', '-c', 'ls /sys/class/net; ip route; ping -c1 -W1 10.0.2.2 >/dev/null 2>&1 && echo reached || echo unreachable'], { home });
    expect(r.stdout.split('\n')).toEqual(['lo', 'unreachable', '']);
  });

  it('gives a guest with --net an interface and a default route', async () => {
    const r = await smol(['run', '--net', '--', 'sh', '-c', 'ls /sys/class/net | tr "\\n" " "; ip route | grep -c default'], { home });
    expect(r.stdout).toContain('eth0');
    expect(r.stdout.trim().endsWith('1')).toBe(true);
  });

  it('kills the command after --timeout with exit 124', async () => {
    const r = await smol(['run', '--timeout', '1s', '--', 'sleep', '30'], { home });
    expect(r.code).toBe(124);
  });

  it('ends with 141 and removes the machine when the reader of its output goes away (| head)', async () => {
    const child = smolSpawn(['run', '--', 'sh', '-c', 'while :; do echo y; done'], { home });
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
    child.stdout!.destroy(); // as `head -1` does once it has its line
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(141);
    // looked at before any `machine ls`, which would clean up an orphan on its own
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
  });

  it('reaps the machine of a run killed with -9 at the next run, without a `machine ls`', async () => {
    const child = smolSpawn(['run', '--', 'sh', '-c', 'echo ready; exec sleep 60'], { home });
    await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => { if (String(d).includes('ready')) resolve(); }));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('close', resolve));
    // the orphan's QEMU outlives its smol (daemonized), so there is something to reap
    expect(qemuProcessesMentioning(home)).toHaveLength(1);
    const r = await smol(['run', '--', 'true'], { home });
    expect(r.code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
  });

  it('delivers Ctrl-C to the guest process and removes the machine', async () => {
    const child = smolSpawn(['run', '--', 'sh', '-c', 'echo ready; exec sleep 60'], { home });
    let out = '';
    await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => { out += d; if (out.includes('ready')) resolve(); }));
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(130);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    const ls = await smol(['machine', 'ls', '--json'], { home });
    expect(JSON.parse(ls.stdout)).toEqual([]);
  });

  it('stops with 143 on SIGTERM even when the guest command ignores it, and removes the machine', async () => {
    const child = smolSpawn(['run', '--', 'sh', '-c', 'trap "" TERM INT; echo ready; while :; do sleep 1; done'], { home });
    let out = '';
    await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => { out += d; if (out.includes('ready')) resolve(); }));
    const t0 = Date.now();
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(143);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
  });

  it('stops with 143 on SIGTERM during boot and leaves nothing behind', async () => {
    const child = smolSpawn(['run', '--cold-boot', '--', 'true'], { home, env: { SMOL_VERBOSE: '1' } });
    let err = '';
    await new Promise<void>((resolve) => child.stderr!.on('data', (d: Buffer) => { err += d; if (err.includes('waiting for the guest agent')) resolve(); }));
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(143);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
  });

  it('leaves no machine, QEMU or files behind after runs', async () => {
    expect(qemuProcessesMentioning(home)).toEqual([]);
    const dir = path.join(home, 'machines');
    expect(fs.existsSync(dir) ? fs.readdirSync(dir) : []).toEqual([]);
  });
});

describe('smol run: bad input', () => {
  it('rejects --mem 0 naming the flag', async () => {
    const r = await smol(['run', '--mem', '0', '--', 'true'], { home });
    expect(r.code).toBe(65);
    expect(r.stderr).toMatch(/--mem: memory must be at least 64 MiB/);
  });

  it('rejects an unknown Smolfile key with its line', async () => {
    const f = path.join(home, 'Smolfile');
    fs.writeFileSync(f, 'cpus: 1\nmemroy: 512\n');
    const r = await smol(['run', '-s', f, '--', 'true'], { home });
    expect(r.code).toBe(65);
    expect(r.stderr).toContain('Smolfile:2 memroy');
  });

  it('reports a missing image path', async () => {
    const r = await smol(['run', '--image', path.join(home, 'nope'), '--', 'true'], { home });
    expect(r.code).toBe(66);
    expect(r.stderr).toMatch(/nope/);
  });

  it('keeps a registry reference a reference: offline, the error names it as written and how to pull it', async () => {
    const r = await smol(['run', '--image', 'debian:bookworm', '--', 'true'], { home, cwd: home, env: { SMOL_OFFLINE: '1' } });
    expect(r.code).toBe(66);
    expect(r.stderr).toContain('docker.io/library/debian:bookworm is not in the local image cache (offline)');
    expect(r.stderr).not.toContain(path.join(home, 'debian:bookworm'));
    expect(r.stderr).toMatch(/hint: Pull it once with the network: smol image pull debian:bookworm/);
  });

  it('explains a missing QEMU', async () => {
    // a PATH with a shell and nothing else: QEMU cannot be found
    const bin = fs.mkdtempSync(path.join(home, 'bin-'));
    fs.symlinkSync('/bin/sh', path.join(bin, 'sh'));
    const r = await smol(['run', '--', 'true'], { home, env: { PATH: bin } });
    expect(r.code).toBe(69);
    expect(r.stderr).toMatch(/qemu/i);
  });

  it('explains a missing kernel', async () => {
    const empty = scratchHome('nokernel');
    const r = await smol(['run', '--', 'true'], { home: empty, env: { SMOL_ASSETS: empty } });
    expect(r.code).toBe(69);
    expect(r.stderr).toMatch(/smol setup/);
    fs.rmSync(empty, { recursive: true, force: true });
  });

  it('bounds the wait for a guest that never becomes ready and shows the console', async () => {
    // a restored snapshot can be ready within 0.3 s; a kernel boot cannot
    const r = await smol(['run', '--cold-boot', '--boot-timeout', '0.3s', '--', 'true'], { home });
    expect(r.code).toBe(71);
    expect(r.stderr).toMatch(/did not become ready/);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });
});
