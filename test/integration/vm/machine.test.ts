import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';

let home: string;
beforeAll(() => { home = scratchHome('machine'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);

describe('persistent machines (real QEMU)', () => {
  it('creates a machine from a Smolfile, refuses the same name twice', async () => {
    const sf = path.join(home, 'Smolfile');
    fs.writeFileSync(sf, 'memory: 192\nworkdir: /tmp\nenv: {ROLE: web}\ninit:\n  - echo booted-once >> /etc/first-boot\n');
    const r = await smol(['machine', 'create', '-s', sf, 'vm1', '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(json(r.stdout)).toMatchObject({ name: 'vm1', state: 'stopped', memoryMiB: 192 });
    const again = await smol(['machine', 'create', 'vm1'], { home });
    expect(again.code).toBe(67);
    expect(again.stderr).toMatch(/already exists/);
  });

  it('refuses exec into a stopped machine with a hint', async () => {
    const r = await smol(['machine', 'exec', 'vm1', '--', 'true'], { home });
    expect(r.code).toBe(67);
    expect(r.stderr).toMatch(/not running.*\n.*smol machine start vm1/s);
  });

  it('starts, runs init once, and execs with the machine env', async () => {
    const s = await smol(['machine', 'start', 'vm1'], { home });
    expect(s.code, s.stderr).toBe(0);
    const r = await smol(['machine', 'exec', 'vm1', '--', 'sh', '-c', 'echo $ROLE; cat /etc/first-boot; hostname; pwd'], { home });
    expect(r.stdout).toBe('web\nbooted-once\nvm1\n/tmp\n');
    // the machine's workdir is exec's default, -w still wins, and a background command starts there too
    expect((await smol(['machine', 'exec', '-w', '/root', 'vm1', '--', 'pwd'], { home })).stdout).toBe('/root\n');
    const bg = json((await smol(['machine', 'exec', '-d', '--json', 'vm1', '--', 'pwd'], { home })).stdout);
    const log = await smol(['machine', 'exec', 'vm1', '--', 'sh', '-c', `while [ ! -s ${bg.log} ]; do sleep 0.1; done; cat ${bg.log}`], { home, timeoutMs: 30_000 });
    expect(log.stdout).toBe('/tmp\n');
    const ls = json((await smol(['machine', 'ls', '--json'], { home })).stdout);
    expect(ls).toMatchObject([{ name: 'vm1', state: 'running' }]);
  });

  it('copies files both ways', async () => {
    const src = path.join(home, 'payload.bin');
    const data = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
    data.write('smol-payload');
    fs.writeFileSync(src, data);
    expect((await smol(['machine', 'cp', src, 'vm1:/root/payload.bin'], { home })).code).toBe(0);
    const sum = await smol(['machine', 'exec', 'vm1', '--', 'md5sum', '/root/payload.bin'], { home });
    const back = path.join(home, 'back.bin');
    expect((await smol(['machine', 'cp', 'vm1:/root/payload.bin', back], { home })).code).toBe(0);
    expect(fs.readFileSync(back).equals(data)).toBe(true);
    expect(sum.stdout.split(' ')[0]).toMatch(/^[0-9a-f]{32}$/);
  });

  it('keeps disk changes across stop and start, and init does not run again; the hostname is set again', async () => {
    expect((await smol(['machine', 'exec', 'vm1', '--', 'sh', '-c', 'echo kept > /root/state; sync'], { home })).code).toBe(0);
    expect((await smol(['machine', 'stop', 'vm1'], { home })).code).toBe(0);
    expect(json((await smol(['machine', 'status', 'vm1', '--json'], { home })).stdout).state).toBe('stopped');
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect((await smol(['machine', 'start', 'vm1'], { home })).code).toBe(0);
    const r = await smol(['machine', 'exec', 'vm1', '--', 'sh', '-c', 'cat /root/state; wc -l < /etc/first-boot; hostname'], { home });
    expect(r.stdout).toBe('kept\n1\nvm1\n');
  });

  it('shows the guest console with logs', async () => {
    const r = await smol(['machine', 'logs', 'vm1'], { home });
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(0);
  });

  it('reports a machine whose QEMU was killed as crashed; exec fails clearly; rm cleans up', async () => {
    const st = json((await smol(['machine', 'status', 'vm1', '--json'], { home })).stdout);
    process.kill(st.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    const ex = await smol(['machine', 'exec', 'vm1', '--', 'true'], { home });
    expect(ex.code).toBe(72);
    expect(ex.stderr).toMatch(/crashed/);
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toMatchObject([{ name: 'vm1', state: 'crashed' }]);
    expect((await smol(['machine', 'rm', 'vm1'], { home })).code).toBe(0);
    expect(fs.existsSync(st.dir)).toBe(false);
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
  });

  it('fails an exec whose QEMU dies mid-command with a channel error', async () => {
    expect((await smol(['machine', 'create', 'vm2', '--start'], { home })).code).toBe(0);
    const st = json((await smol(['machine', 'status', 'vm2', '--json'], { home })).stdout);
    const pending = smol(['machine', 'exec', 'vm2', '--', 'sh', '-c', 'echo started; sleep 30'], { home });
    await new Promise((r) => setTimeout(r, 1500));
    process.kill(st.pid, 'SIGKILL');
    const r = await pending;
    expect(r.code).toBe(72);
    expect(r.stderr).toMatch(/channel|crashed/i);
    expect((await smol(['machine', 'rm', 'vm2'], { home })).code).toBe(0);
  });
});
