import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const dbModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../src/vm/store/db.ts');
const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true }); });

/** One process that says it is ready, waits for `go` to appear, then opens the database (all of them together). */
function opener(file: string, go: string, ready: string): Promise<{ code: number | null; stderr: string }> {
  const script = `
    import fs from 'node:fs';
    const { openMachineDb } = await import(${JSON.stringify(dbModule)});
    fs.writeFileSync(${JSON.stringify(ready)}, '');
    while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 1));
    openMachineDb(${JSON.stringify(file)}).close();`;
  const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  p.stderr.on('data', (c) => { stderr += String(c); });
  return new Promise((resolve) => p.on('exit', (code) => resolve({ code, stderr })));
}

describe('the machine database', () => {
  it('is created once when several processes open a fresh file at the same moment (two workers starting together)', async () => {
    for (let round = 0; round < 3; round++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-db-race-'));
      dirs.push(dir);
      const [file, go] = [path.join(dir, 'smol.db'), path.join(dir, 'go')];
      const ready = Array.from({ length: 6 }, (_, i) => path.join(dir, `ready-${i}`));
      const runs = ready.map((r) => opener(file, go, r));
      while (!ready.every((r) => fs.existsSync(r))) await new Promise((r) => setTimeout(r, 10));
      fs.writeFileSync(go, '');
      const results = await Promise.all(runs);
      expect(results.filter((r) => r.code !== 0).map((r) => r.stderr)).toEqual([]);
    }
  }, 120_000);
});
