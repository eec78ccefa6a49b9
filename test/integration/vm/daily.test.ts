/**
 * The everyday verbs of #18 on real QEMU: `run -d`, `machine shell`, `machine exec -d/--stream` and
 * `pack run`'s run flags. One scratch home; machines are few and commands short.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, killQemuMentioning, qemuProcessesMentioning, root, scratchHome, smol, smolBin, smolSpawn } from '../../helpers/cli.js';

let home: string;
beforeAll(() => { home = scratchHome('daily'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);
const names = async () => (json((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string }[]).map((m) => m.name);
async function until<T>(f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 300));
  }
}

describe('smol run -d (detached throwaway machines)', () => {
  it('refuses -t with -d and --no-rm without -d, creating nothing', async () => {
    const t = await smol(['run', '-d', '-t', '--', 'true'], { home });
    expect(t.code).toBe(64);
    expect(t.stderr).toMatch(/-t cannot be used with -d/);
    const n = await smol(['run', '--no-rm', '--', 'true'], { home });
    expect(n.code).toBe(64);
    expect(await names()).toEqual([]);
  });

  it('prints the name and returns; logs -f follows the command to its end; the machine is then removed', async () => {
    const r = await smol(['run', '-d', '--name', 'job1', '--', 'sh', '-c', 'echo out1; sleep 0.3; echo err1 >&2; until [ -e /tmp/go ]; do sleep 0.2; done; echo out2'], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('job1\n');
    const st = json((await smol(['machine', 'status', 'job1', '--json'], { home })).stdout);
    expect(st).toMatchObject({ state: 'running', ephemeral: true, detached: { state: 'running', rm: true, exitCode: null } });
    // logs -f, once it has printed what is there, follows the rest until the command ends
    const logs = smolSpawn(['machine', 'logs', '-f', 'job1'], { home });
    let out = '';
    logs.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    const closed = new Promise<number | null>((r) => logs.on('close', r));
    await until(async () => (out.includes('err1\n') ? true : undefined));
    expect((await smol(['machine', 'exec', 'job1', '--', 'touch', '/tmp/go'], { home })).code).toBe(0);
    expect(await closed).toBe(0);
    expect(out).toBe('out1\nerr1\nout2\n');
    await until(async () => ((await names()).includes('job1') ? undefined : true));
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('exec and stop work on a detached run; stopping ends its command and removes it', async () => {
    expect((await smol(['run', '-d', '--name', 'job2', '--', 'sleep', '600'], { home })).code).toBe(0);
    const e = await smol(['machine', 'exec', 'job2', '--', 'sh', '-c', 'pidof sleep >/dev/null && echo sleeping'], { home });
    expect(e.stdout).toBe('sleeping\n');
    expect((await smol(['machine', 'stop', 'job2'], { home })).code).toBe(0);
    await until(async () => ((await names()).includes('job2') ? undefined : true));
  });

  it('--no-rm keeps the stopped machine with its exit code and output until machine rm; it never starts again', async () => {
    expect((await smol(['run', '-d', '--no-rm', '--name', 'job3', '--', 'sh', '-c', 'echo bye; exit 7'], { home })).code).toBe(0);
    const st = await until(async () => {
      const s = json((await smol(['machine', 'status', 'job3', '--json'], { home })).stdout);
      return s.detached.state === 'exited' && s.state === 'stopped' ? s : undefined;
    });
    expect(st.detached).toMatchObject({ exitCode: 7, rm: false, command: ['sh', '-c', 'echo bye; exit 7'] });
    expect((await smol(['machine', 'logs', 'job3'], { home })).stdout).toBe('bye\n');
    expect(await names()).toContain('job3'); // listing does not sweep it as an orphan
    const start = await smol(['machine', 'start', 'job3'], { home });
    expect(start.code).toBe(67);
    expect(start.stderr).toMatch(/throwaway machine .* cannot be started again/);
    expect((await smol(['machine', 'rm', 'job3'], { home })).code).toBe(0);
  });

  it('a detached command that prints without end fills at most twice the console cap of host disk', async () => {
    const env = { SMOL_CONSOLE_MAX_BYTES: '16384' };
    const cmd = ['sh', '-c', 'yes flood-line | head -n 20000; echo END-MARK'];
    expect((await smol(['run', '-d', '--no-rm', '--name', 'job4', '--', ...cmd], { home, env })).code).toBe(0);
    const st = await until(async () => {
      const s = json((await smol(['machine', 'status', 'job4', '--json'], { home })).stdout);
      return s.detached.state === 'exited' ? s : undefined;
    });
    const out = path.join(st.dir as string, 'output.log');
    expect(fs.statSync(out).size).toBeLessThanOrEqual(16384);
    expect(fs.statSync(`${out}.1`).size).toBeLessThanOrEqual(16384);
    expect((await smol(['machine', 'logs', '-n', '1', 'job4'], { home })).stdout).toBe('END-MARK\n');
    expect((await smol(['machine', 'rm', 'job4'], { home })).code).toBe(0);
  });

  it('a boot that fails is reported by run -d with its exit code and leaves nothing', async () => {
    const r = await smol(['run', '-d', '--boot-timeout', '0.001', '--cold-boot', '--', 'true'], { home });
    expect(r.code).toBe(71);
    expect(await names()).toEqual([]);
  });
});

const probe = path.join(root, 'test/helpers/pty-probe.py');
const hasPython = spawnSync('python3', ['-c', 'import pty, termios'], { stdio: 'ignore' }).status === 0;

describe('machine shell, exec -d and --stream', () => {
  beforeAll(async () => {
    const c = await smol(['machine', 'create', 'box'], { home });
    expect(c.code, c.stderr).toBe(0);
  });

  it.skipIf(!hasPython)('shell starts the stopped machine and opens a login shell on a terminal; its exit code passes through (skipped without python3: it provides the pty)', () => {
    const r = spawnSync('python3', [probe, '# ', 'tty; exit 3\r', '--', process.execPath, smolBin, 'machine', 'sh', 'box'],
      { env: { ...cliEnv({ home }), NO_COLOR: undefined }, encoding: 'utf8', timeout: 110_000 });
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as { code: number; output: string; icanon: boolean };
    expect(p.code).toBe(3);
    expect(p.icanon).toBe(false); // the host terminal is raw: the guest's tty does the line editing
    expect(p.output).toMatch(/\/dev\/pts\/\d+/);
  });

  it('shell without a terminal reads its commands from stdin', async () => {
    const r = await smol(['machine', 'shell', 'box'], { home, input: 'echo "$0 $HOSTNAME"; exit 4\n' });
    expect(r.code).toBe(4);
    expect(r.stdout).toMatch(/sh box/);
  });

  it('exec -d returns the pid of a process that keeps running, with its output in /run/smol/exec/PID.log', async () => {
    const r = await smol(['machine', 'exec', '-d', '--json', 'box', '--', 'sh', '-c', 'echo started; exec sleep 300'], { home });
    expect(r.code, r.stderr).toBe(0);
    const { pid, log } = json(r.stdout) as { pid: number; log: string };
    expect(log).toBe(`/run/smol/exec/${pid}.log`);
    // it runs on its own: wait (in the guest) until it has reached its sleep
    const check = await smol(['machine', 'exec', 'box', '--', 'sh', '-c',
      `i=0; while [ "$(cat /proc/${pid}/comm)" != sleep ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; kill -0 ${pid} && cat ${log} && cat /proc/${pid}/comm`], { home });
    expect(check.stdout).toBe('started\nsleep\n');
    const missing = await smol(['machine', 'exec', '-d', 'box', '--', 'no-such-program'], { home });
    expect(missing.code).toBe(66);
  });

  it('--stream prefixes whole lines, on stdout and stderr, and keeps the exit code', async () => {
    const r = await smol(['machine', 'exec', '--stream', 'box', '--', 'sh', '-c', 'printf "a\\nb"; echo e >&2; exit 5'], { home });
    expect(r.code).toBe(5);
    expect(r.stdout).toBe('[box] a\n[box] b\n');
    expect(r.stderr).toBe('[box] e\n');
  });

  it('pack run takes -e, -w, --cpus, --mem and secrets over the manifest', async () => {
    expect((await smol(['machine', 'stop', 'box'], { home })).code).toBe(0);
    const art = path.join(home, 'box.smolmachine');
    const p = await smol(['pack', 'create', '--from-vm', 'box', '-o', art], { home, timeoutMs: 120_000 });
    expect(p.code, p.stderr).toBe(0);
    const r = await smol(['pack', 'run', '-e', 'K=v', '-w', '/tmp', '--cpus', '2', '--mem', '320M', art, '--', 'sh', '-c', 'echo $K $(pwd) $(nproc); grep MemTotal /proc/meminfo'], { home, timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    const [first, mem] = r.stdout.split('\n');
    expect(first).toBe('v /tmp 2');
    expect(Number(/(\d+) kB/.exec(mem)![1])).toBeGreaterThan(256 * 1024); // more than the packed 256 MiB
    // secrets reach a pack run's command as they reach smol run's, read from the host at the run
    const sec = await smol(['pack', 'run', '--secret-env', 'SMOL_PACK_TOKEN', art, '--', 'sh', '-c', 'echo "$SMOL_PACK_TOKEN"'], { home, env: { SMOL_PACK_TOKEN: 'pack-secret-1' }, timeoutMs: 120_000 });
    expect(sec.stdout, sec.stderr).toBe('pack-secret-1\n');
    const missing = await smol(['pack', 'run', '--secret-env', 'SMOL_NO_SUCH_VAR', art, '--', 'true'], { home });
    expect(missing.code).toBe(66);
    const bad = await smol(['pack', 'run', '--cpus', '0', art, '--', 'true'], { home });
    expect(bad.code).toBe(65);
    expect(bad.stderr).toMatch(/--cpus/);
  });
});
