/** A ledger location smol cannot write is one precise error (73, as for any file it cannot create), not a crash (70) or a hang. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LedgerError } from '../../../src/errors/index.js';
import { openLedger } from '../../../src/ledger/open.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-ledger-open-'));
const immutable: string[] = [];
afterAll(() => {
  for (const d of immutable) spawnSync('chattr', ['-i', d]);
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A directory nobody may write: a mode for ordinary users; root ignores modes, so the immutable attribute, where the filesystem has one. */
function readOnlyDir(name: string): string | null {
  const d = path.join(dir, name);
  fs.mkdirSync(d);
  if (process.getuid?.() !== 0) {
    fs.chmodSync(d, 0o555);
    return d;
  }
  if (spawnSync('chattr', ['+i', d]).status !== 0) return null;
  immutable.push(d);
  return d;
}

async function openFailure(ledger: string, env: NodeJS.ProcessEnv = {}): Promise<LedgerError> {
  const err = await openLedger(ledger, env).then(async (l) => {
    await l.ledger.close();
    l.blobs.close();
    return null;
  }, (e: unknown) => e);
  expect(err).toBeInstanceOf(LedgerError);
  return err as LedgerError;
}

const canMakeReadOnly = (() => {
  const probe = readOnlyDir('probe');
  return probe !== null && spawnSync('touch', [path.join(probe, 'x')]).status !== 0;
})();

describe('opening a ledger where it cannot be written', () => {
  it('names a path under a regular file', async () => {
    const file = path.join(dir, 'plain');
    fs.writeFileSync(file, '');
    const e = await openFailure(path.join(file, 'sub', 'ledger.db'));
    expect(e).toMatchObject({ exitCode: 73, where: path.join(file, 'sub', 'ledger.db'), message: expect.stringContaining(`${file} is not a directory`) });
    expect(e.hint).toMatch(/--ledger|SMOL_LEDGER/);
  });

  it('refuses a directory that cannot be created, at once (Node\'s recursive mkdir spins forever under /proc)', async () => {
    const e = await openFailure(`/proc/smol-ledger-test-${process.pid}/ledger.db`);
    expect(e).toMatchObject({ exitCode: 73, message: expect.stringContaining(`/proc/smol-ledger-test-${process.pid}`) });
  });

  it.skipIf(!canMakeReadOnly)('names a read-only SMOL_HOME, new or with a ledger already in it', async () => {
    const ro = readOnlyDir('home')!;
    const fresh = await openFailure('', { SMOL_HOME: ro });
    expect(fresh).toMatchObject({ exitCode: 73, where: path.join(ro, 'ledger.db'), message: expect.stringContaining(`${ro} is not writable`) });

    const used = path.join(dir, 'used');
    const l = await openLedger('', { SMOL_HOME: used });
    await l.ledger.close();
    l.blobs.close();
    if (process.getuid?.() === 0) {
      expect(spawnSync('chattr', ['+i', used]).status).toBe(0);
      immutable.push(used);
    } else fs.chmodSync(used, 0o555);
    expect(await openFailure('', { SMOL_HOME: used })).toMatchObject({ exitCode: 73, where: path.join(used, 'ledger.db') });
  });

  it.skipIf(!canMakeReadOnly)('names a ledger file that is there but read-only', async () => {
    const home = path.join(dir, 'rofile');
    const l = await openLedger('', { SMOL_HOME: home });
    await l.ledger.close();
    l.blobs.close();
    for (const f of fs.readdirSync(home).filter((n) => n.startsWith('ledger.db-'))) fs.rmSync(path.join(home, f));
    const file = path.join(home, 'ledger.db');
    if (process.getuid?.() === 0) {
      expect(spawnSync('chattr', ['+i', file]).status).toBe(0);
      immutable.push(file);
    } else fs.chmodSync(file, 0o444);
    expect(await openFailure('', { SMOL_HOME: home })).toMatchObject({ exitCode: 73, where: file, message: expect.stringContaining(`${file} is not writable`) });
  });
});
