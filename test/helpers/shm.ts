/**
 * Removes the /dev/shm files of one scratch home's machines, fork points, spares and half-made forks, and no
 * others: tests on the same host keep their live machines' RAM and saved points' templates there too, and
 * deleting "every smol-* file made since this test began" removed a running machine's RAM under another test.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export function removeHomeShm(home: string): void {
  const ids = new Set<string>();
  try {
    const db = new Database(path.join(home, 'smol.db'), { readonly: true });
    for (const r of [...db.prepare('SELECT id FROM machines').all(), ...db.prepare('SELECT id FROM fork_points').all()]) ids.add((r as { id: string }).id);
    db.close();
  } catch { /* no registry */ }
  const list = (d: string) => { try { return fs.readdirSync(d); } catch { return []; } };
  for (const id of list(path.join(home, 'forks'))) ids.add(id);
  for (const m of list(path.join(home, 'machines'))) {
    ids.add(m);
    try { ids.add((JSON.parse(fs.readFileSync(path.join(home, 'machines', m, 'spare.json'), 'utf8')) as { forkId: string }).forkId); } catch { /* no spare */ }
  }
  for (const id of ids) for (const f of [`smol-${id}.mem`, `smol-fork-${id}.mem`]) fs.rmSync(path.join('/dev/shm', f), { force: true });
}
