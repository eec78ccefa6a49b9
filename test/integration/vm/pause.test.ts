import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';

let home: string;
let sleeper: number;
beforeAll(() => { home = scratchHome('pause'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);
const stateOf = async () => json((await smol(['machine', 'ls', '--json'], { home })).stdout)[0]?.state as string | undefined;

/** What a pause must keep: a process started before it, a file in tmpfs (RAM only), and a clock that is right again. */
async function expectContinued(): Promise<void> {
  const r = await smol(['machine', 'exec', 'p', '--', 'sh', '-c', `kill -0 ${sleeper} && echo alive; cat /dev/shm/kept; date +%s`], { home });
  expect(r.code, r.stderr).toBe(0);
  const [alive, kept, guestNow] = r.stdout.trim().split('\n');
  expect([alive, kept]).toEqual(['alive', 'in-ram']);
  expect(Math.abs(Number(guestNow) - Date.now() / 1000)).toBeLessThan(3);
}

describe('machine pause and resume (real QEMU)', () => {
  it('pauses the vCPUs: exec is refused with a hint, resume continues', async () => {
    expect((await smol(['machine', 'create', '--mem', '192M', 'p', '--start'], { home })).code).toBe(0);
    const bg = await smol(['machine', 'exec', '-d', 'p', '--', 'sleep', '100000'], { home });
    sleeper = Number(bg.stdout.trim());
    expect(sleeper).toBeGreaterThan(0);
    expect((await smol(['machine', 'exec', 'p', '--', 'sh', '-c', 'echo in-ram > /dev/shm/kept'], { home })).code).toBe(0);

    expect((await smol(['machine', 'pause', 'p'], { home })).code).toBe(0);
    expect(await stateOf()).toBe('paused');
    const ex = await smol(['machine', 'exec', 'p', '--', 'true'], { home });
    expect(ex.code).toBe(67);
    expect(ex.stderr).toMatch(/paused.*\n.*smol machine resume p/s);
    expect((await smol(['machine', 'pause', 'p'], { home })).stderr).toMatch(/already paused/);
    expect((await smol(['machine', 'resume', 'p'], { home })).code).toBe(0);
    expect(await stateOf()).toBe('running');
    await expectContinued();
    expect((await smol(['machine', 'resume', 'p'], { home })).code).toBe(67);
  });

  it('pauses to disk: no QEMU left, and resume continues with the clock stepped', async () => {
    const p = await smol(['machine', 'pause', '--to-disk', 'p'], { home });
    expect(p.code, p.stderr).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(await stateOf()).toBe('paused');
    // the guest clock stood still meanwhile: resume must step it
    await new Promise((r) => setTimeout(r, 4000));
    expect((await smol(['machine', 'resume', 'p'], { home })).code).toBe(0);
    expect(await stateOf()).toBe('running');
    await expectContinued();
  });

  it('leaves a machine that resumes after a kill -9 mid-save, before or after the save is complete', async () => {
    for (const point of ['saving', 'saved']) {
      const killed = await smol(['machine', 'pause', '--to-disk', 'p'], { home, env: { SMOL_PAUSE_FAULT: `die:${point}` } });
      expect(killed.signal, point).toBe('SIGKILL');
      // truthful: frozen, not crashed, whether the QEMU is still there (saving) or the save is (saved)
      expect(await stateOf()).toBe('paused');
      // start continues a paused machine too
      expect((await smol(['machine', point === 'saved' ? 'start' : 'resume', 'p'], { home })).code).toBe(0);
      await expectContinued();
      expect(qemuProcessesMentioning(home)).toHaveLength(1);
    }
  });

  it('stops a machine paused to disk, discarding its save; start then boots', async () => {
    expect((await smol(['machine', 'pause', '--to-disk', 'p'], { home })).code).toBe(0);
    expect((await smol(['machine', 'stop', 'p'], { home })).code).toBe(0);
    expect(await stateOf()).toBe('stopped');
    expect((await smol(['machine', 'pause', 'p'], { home })).stderr).toMatch(/pause failed: .* is stopped/);
    expect((await smol(['machine', 'start', 'p'], { home })).code).toBe(0);
    expect((await smol(['machine', 'exec', 'p', '--', 'sh', '-c', 'test -e /dev/shm/kept || echo fresh'], { home })).stdout).toBe('fresh\n');
    expect((await smol(['machine', 'rm', '--force', 'p'], { home })).code).toBe(0);
  });
});
