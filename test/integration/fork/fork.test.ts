/**
 * Live fork on real QEMU (TCG here): a forkable parent, a handshake at the fork point, clones that are
 * ordinary machines, faults, and a family removed without leaving processes or files behind.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';
import { removeHomeShm } from '../../helpers/shm.js';

let home: string;
const shmBefore = new Set(fs.readdirSync('/dev/shm'));
/** smol's /dev/shm files made since this file began, but not those another home's QEMU maps (tests run beside this one). */
const newShm = () => {
  const fresh = fs.readdirSync('/dev/shm').filter((f) => f.startsWith('smol-') && !shmBefore.has(f));
  const foreign = new Set<string>();
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('qemu-system') || cmd.includes(home)) continue;
      const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8');
      for (const f of fresh) if (maps.includes(f) || cmd.includes(f)) foreign.add(f);
    } catch { /* gone */ }
  }
  return fresh.filter((f) => !foreign.has(f));
};

beforeAll(() => { home = scratchHome('fork'); });
afterAll(() => {
  killQemuMentioning(home);
  removeHomeShm(home); // only ours: other tests' machines keep their RAM in /dev/shm too
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);
const sh = async (m: string, script: string) => {
  const r = await smol(['machine', 'exec', m, '--', 'sh', '-c', script], { home });
  expect(r.code, `${m}: ${script}\n${r.stderr}`).toBe(0);
  return r.stdout;
};
const status = async (m: string) => json((await smol(['machine', 'status', m, '--json'], { home })).stdout);

describe('smol fork (real QEMU)', () => {
  it('refuses a stopped machine, a bad --count, and a machine not started forkable, saying how to fix it', async () => {
    expect((await smol(['machine', 'create', 'cold'], { home })).code).toBe(0);
    const stopped = await smol(['fork', 'cold'], { home });
    expect(stopped.code).toBe(67);
    expect(stopped.stderr).toMatch(/not running[\s\S]*smol machine start cold --forkable/);
    const zero = await smol(['fork', 'cold', '--count', '0'], { home });
    expect(zero.code).toBe(65);
    expect(zero.stderr).toMatch(/--count/);
    expect((await smol(['machine', 'start', 'cold'], { home })).code).toBe(0);
    const plain = await smol(['fork', 'cold'], { home });
    expect(plain.code).toBe(67);
    expect(plain.stderr).toMatch(/not started forkable[\s\S]*--forkable/);
    expect((await smol(['machine', 'rm', '--force', 'cold'], { home })).code).toBe(0);
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
  });

  it('forks at the handshake: clones learn their role and env, get their own identity, RNG and disk', async () => {
    expect((await smol(['machine', 'create', 'p', '--forkable', '--start'], { home })).code).toBe(0);
    await sh('p', 'echo before > /root/shared; sync; setsid sh -c \'eval "$(smol-fork-ready)"; echo "$SMOL_FORK_ROLE $SMOL_CLONE_INDEX $TASK" > /root/role\' </dev/null >/dev/null 2>&1 &');
    const r = await smol(['fork', 'p', '--count', '2', '--wait-ready', '--ready-timeout', '60s', '-e', 'TASK=t{index}', '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    const out = json(r.stdout);
    expect(out).toMatchObject({ parent: 'p', held: false, memory: 'shared', parentReleased: 1 });
    expect(out.clones.map((c: { name: string; ok: boolean; released: number }) => [c.name, c.ok, c.released])).toEqual([['p-1', true, 1], ['p-2', true, 1]]);
    // the first clone is the warm spare that `machine start --forkable` left waiting; the fork leaves a new one
    expect(out.clones.map((c: { fromSpare?: boolean }) => !!c.fromSpare)).toEqual([true, false]);
    expect(out.nextSpareMs).toEqual(expect.any(Number));
    expect(out.stateBytes).toBeLessThan(1 << 20); // device state only: RAM stays in the shared template

    const facts = async (m: string) => (await sh(m, 'for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /root/role ] && break; sleep 0.2; done; cat /root/role; hostname; cat /etc/machine-id 2>/dev/null || echo none; head -c 16 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; echo "$TASK $SMOL_CLONE_NAME"; cat /root/shared')).split('\n');
    const [p, c1, c2] = [await facts('p'), await facts('p-1'), await facts('p-2')];
    expect(p[0]).toBe('parent  ');
    expect(c1.slice(0, 2)).toEqual(['clone 1 t1', 'p-1']);
    expect(c2.slice(0, 2)).toEqual(['clone 2 t2', 'p-2']);
    expect(c1[2]).toMatch(/^[0-9a-f]{32}$/);
    expect(c1[2]).not.toBe(c2[2]);
    expect(new Set([p[3], c1[3], c2[3]]).size).toBe(3);
    expect([c1[4], c2[4]]).toEqual(['t1 p-1', 't2 p-2']);
    expect([p[5], c1[5], c2[5]]).toEqual(['before', 'before', 'before']);

    await sh('p-1', 'echo one > /root/mine; sync');
    await sh('p', 'echo parent-after > /root/shared; sync');
    expect(await sh('p-2', 'cat /root/mine 2>/dev/null || echo absent; cat /root/shared')).toBe('absent\nbefore\n');
    expect(await sh('p', 'cat /root/mine 2>/dev/null || echo absent')).toBe('absent\n');
    expect(await sh('p-1', 'cat /root/mine /root/shared')).toBe('one\nbefore\n');

    const ls = json((await smol(['machine', 'ls', '--json'], { home })).stdout);
    expect(ls.map((m: { name: string; parent: string | null; generation: number }) => [m.name, m.parent, m.generation])).toEqual([['p', null, 0], ['p-1', 'p', 1], ['p-2', 'p', 1]]);
    // accounting: the two clones share their template's pages, so each one's PSS is well under its RSS, and
    // their disks are thin overlays over the parent's frozen one
    const c1u = (await status('p-1')).usage;
    expect(c1u.memory.sharedMiB).toBeGreaterThan(1);
    expect(c1u.memory.pssMiB).toBeLessThan(c1u.memory.rssMiB);
    expect(c1u.disk.chain).toHaveLength(3); // own overlay → p's frozen overlay → image base
    expect(c1u.disk.privateBytes).toBeLessThan(c1u.disk.sharedBytes);
    expect((await smol(['machine', 'ls'], { home })).stdout).toMatch(/PSS[\s\S]*DISK/);
  });

  it('refuses a colliding --name-prefix before pausing anything', async () => {
    const r = await smol(['fork', 'p', '--count', '2', '--name-prefix', 'p-'], { home });
    expect(r.code).toBe(67);
    expect(r.stderr).toMatch(/already taken: p-1, p-2/);
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toHaveLength(3);
  });

  it('keeps the others and the parent when one clone fails, leaving nothing of it behind', async () => {
    const before = fs.readdirSync(path.join(home, 'machines')).length;
    const r = await smol(['fork', 'p', '--count', '2', '--name-prefix', 'f', '--json'], { home, env: { SMOL_FORK_FAULT: 'kill-clone:2' } });
    expect(r.code).not.toBe(0);
    const out = json(r.stdout);
    expect(out.clones.map((c: { ok: boolean }) => c.ok)).toEqual([true, false]);
    const names = json((await smol(['machine', 'ls', '--json'], { home })).stdout).map((m: { name: string }) => m.name);
    expect(names).toContain('f1');
    expect(names).not.toContain('f2');
    expect(fs.readdirSync(path.join(home, 'machines')).length).toBe(before + 1);
    expect(await sh('f1', 'echo ok')).toBe('ok\n');
    expect(await sh('p', 'echo ok')).toBe('ok\n');
    expect((await smol(['machine', 'rm', '--force', 'f1'], { home })).code).toBe(0);
  });

  it('a fork killed with -9 before, in or after the pause leaves nothing once ls has run, and the parent running', async () => {
    const pDir = path.join(home, 'machines', (await status('p')).id);
    const spare = json(fs.readFileSync(path.join(pDir, 'spare.json'), 'utf8')) as { id: string; forkId: string };
    const before = { machines: fs.readdirSync(path.join(home, 'machines')), forks: fs.readdirSync(path.join(home, 'forks')), disks: fs.readdirSync(pDir).filter((f) => f.endsWith('.qcow2')), shm: newShm() };
    // the first takes the warm spare (its QEMU, template and the parent's next overlay); the others start their own
    // clone; the second dies after the parent's QEMU moved onto the next overlay, before the registry heard of it
    for (const fault of ['die:before-pause', 'die:in-pause', 'die:after-restore:1']) {
      const r = await smol(['fork', 'p', '--name-prefix', 'k', '--json'], { home, env: { SMOL_FORK_FAULT: fault } });
      expect(r.signal === 'SIGKILL' || r.code === 137, `${fault}: ${r.code} ${r.signal} ${r.stderr}`).toBe(true);
      const ls = json((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string; pid: number | null }[];
      expect(ls.map((m) => m.name), fault).not.toContain('k1');
      expect(qemuProcessesMentioning(home), fault).toHaveLength(ls.filter((m) => m.pid).length);
      expect(await sh('p', 'echo ok')).toBe('ok\n'); // running, not left paused
      const pst = await status('p');
      const open = fs.readdirSync(`/proc/${pst.pid}/fd`).map((fd) => { try { return fs.readlinkSync(`/proc/${pst.pid}/fd/${fd}`); } catch { return ''; } });
      expect(open, `${fault}: the registry names the overlay QEMU writes`).toContain(pst.usage.disk.chain[0]);
    }
    const subset = (now: string[], was: string[]) => expect(now.filter((f) => !was.includes(f))).toEqual([]);
    subset(fs.readdirSync(path.join(home, 'machines')), before.machines);
    subset(fs.readdirSync(path.join(home, 'forks')), before.forks);
    // the forks that got into the pause moved the parent onto overlays they made: its chain now, which stays
    subset(fs.readdirSync(pDir).filter((f) => f.endsWith('.qcow2')), [...before.disks, ...(await status('p')).usage.disk.chain.map((f: string) => path.basename(f))]);
    subset(newShm(), before.shm);
    expect(fs.existsSync(path.join(home, 'machines', spare.id))).toBe(false);
    expect(fs.readdirSync(pDir)).not.toContain(`disk-${spare.forkId}.qcow2`);
    expect(newShm()).not.toContain(`smol-fork-${spare.forkId}.mem`);
    // a stale record of a dead fork whose overlay is now a layer of the parent's disk (a later fork froze it,
    // say an rm killed while releasing its point): the sweep keeps the layer and the parent's top
    const chain = ((await status('p')).usage.disk.chain as string[]).map((f) => path.basename(f));
    const layer = chain.find((f, i) => i > 0 && /^disk-[0-9a-f]+\.qcow2$/.test(f));
    expect(layer).toBeDefined();
    const staleId = layer!.slice(5, -6);
    fs.mkdirSync(path.join(home, 'forks', staleId), { recursive: true });
    fs.writeFileSync(path.join(home, 'forks', staleId, 'owner.json'), JSON.stringify({ pid: 999_999_999, parent: (await status('p')).id, spare: null }));
    expect((await smol(['machine', 'ls'], { home })).code).toBe(0);
    expect(fs.existsSync(path.join(pDir, layer!))).toBe(true);
    expect(((await status('p')).usage.disk.chain as string[]).map((f) => path.basename(f))).toEqual(chain);
    expect(fs.existsSync(path.join(home, 'forks', staleId))).toBe(false);
    expect(await sh('p', 'echo ok')).toBe('ok\n');
  });

  it('forks a fork (its RAM is private, so the state carries it)', async () => {
    const r = await smol(['fork', 'p-1', '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(json(r.stdout)).toMatchObject({ memory: 'private', clones: [{ name: 'p-1-1', ok: true }] });
    expect(await sh('p-1-1', 'cat /root/mine; hostname')).toBe('one\np-1-1\n');
    expect((await status('p-1-1')).generation).toBe(2);
  });

  it('clones launched before the pause read back from disk exactly what the parent wrote up to it', async () => {
    // the clone's QEMU opens the parent's overlay while the parent still writes to it: a writer keeps
    // allocating clusters across that window, and the clone compares what it cached with what its disk holds
    await sh('p', 'mkdir -p /root/w; (i=0; while :; do dd if=/dev/urandom of=/root/w/$i bs=64k count=4 conv=fsync 2>/dev/null; i=$((i+1)); done) </dev/null >/dev/null 2>&1 & echo $! > /root/w.pid; sleep 1');
    const r = await smol(['fork', 'p', '--name-prefix', 'w', '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    await sh('p', 'kill $(cat /root/w.pid)');
    const check = 'kill $(cat /root/w.pid); sleep 0.2; sync; md5sum /root/w/* > /tmp/cached; echo 3 > /proc/sys/vm/drop_caches; md5sum /root/w/* > /tmp/disk; cmp /tmp/cached /tmp/disk && wc -l < /tmp/disk';
    expect(Number(await sh('w1', check))).toBeGreaterThan(2);
    expect((await smol(['machine', 'rm', '--force', 'w1'], { home })).code).toBe(0);
  });

  it('with --hold leaves the parent paused and its own memory file as the template', async () => {
    const r = await smol(['fork', 'p', '--hold', '--name-prefix', 'h', '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(json(r.stdout)).toMatchObject({ held: true, memory: 'shared', clones: [{ name: 'h1', ok: true }], nextSpareMs: null });
    // a held parent's clones map its own memory, which no spare maps: the spare is gone, not left waiting
    const running = json((await smol(['machine', 'ls', '--json'], { home })).stdout).filter((m: { pid: number | null }) => m.pid);
    expect(qemuProcessesMentioning(home)).toHaveLength(running.length);
    expect(await sh('h1', 'cat /root/shared; hostname')).toBe('parent-after\nh1\n');
    const again = await smol(['fork', 'p'], { home });
    expect(again.code).toBe(67);
    expect(again.stderr).toMatch(/paused/);
  });

  it('keeps clones running after kill -9 of the parent QEMU; rm refuses the parent until --cascade', async () => {
    process.kill((await status('p')).pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    expect(await sh('p-2', 'echo alive')).toBe('alive\n');
    expect(await sh('p-1-1', 'echo alive')).toBe('alive\n');
    expect(await sh('h1', 'echo alive')).toBe('alive\n');
    const refused = await smol(['machine', 'rm', '--force', 'p'], { home });
    expect(refused.code).toBe(67);
    expect(refused.stderr).toMatch(/has 3 clones[\s\S]*--cascade/);
    const family = (json((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string }[]).map((m) => m.name);
    const rm = await smol(['machine', 'rm', '--force', '--cascade', 'p'], { home });
    expect(rm.code).toBe(0);
    // every machine removed is named, each clone before its parent
    const said = rm.stdout.trim().split('\n');
    expect([...said].sort()).toEqual([...family].sort());
    expect(said.at(-1)).toBe('p');
    expect(said.indexOf('p-1-1')).toBeLessThan(said.indexOf('p-1'));
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
    expect(fs.existsSync(path.join(home, 'forks')) ? fs.readdirSync(path.join(home, 'forks')) : []).toEqual([]);
    expect(newShm()).toEqual([]);
  });

  it('frees what a machine whose QEMU died still held (its warm spare, its RAM file) at the next ls', async () => {
    expect((await smol(['machine', 'create', 'q', '--forkable', '--start'], { home })).code).toBe(0);
    const dir = path.join(home, 'machines', (await status('q')).id);
    const spare = json(fs.readFileSync(path.join(dir, 'spare.json'), 'utf8')) as { id: string; forkId: string };
    expect(qemuProcessesMentioning(home)).toHaveLength(2); // q and its spare
    process.kill((await status('q')).pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    const ls = json((await smol(['machine', 'ls', '--json'], { home })).stdout);
    expect(ls).toMatchObject([{ name: 'q', state: 'crashed' }]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.existsSync(path.join(dir, 'spare.json'))).toBe(false);
    expect(fs.existsSync(path.join(home, 'machines', spare.id))).toBe(false);
    expect(newShm()).toEqual([]);
    expect((await smol(['machine', 'rm', 'q'], { home })).code).toBe(0);
  });
});
