/**
 * Regenerates the committed seed corpus of the TypeScript targets from their structured generators
 * (a fixed fast-check seed, so the files only change when a generator does).
 *
 *   node --import tsx test/fuzz/seed.ts [--count N]
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { FUZZ_DIR } from './lib/target.js';
import { TARGETS } from './targets/index.js';

const at = process.argv.indexOf('--count');
const count = at > 0 ? Number(process.argv[at + 1]) : 4;
for (const t of TARGETS) {
  await t.setup?.();
  const built = (await t.extraSeeds?.()) ?? [];
  const dir = path.join(FUZZ_DIR, 'corpus', t.name);
  mkdirSync(dir, { recursive: true });
  const samples = [...built, ...fc.sample(t.arbitrary(built), { numRuns: count * 4, seed: 31 })]
    .filter((b) => b.length > 0 && b.length <= 16 * 1024).slice(0, count);
  for (const b of samples) writeFileSync(path.join(dir, createHash('sha256').update(b).digest('hex').slice(0, 16)), b);
  await t.teardown?.();
  process.stdout.write(`${t.name}: ${samples.length} seeds\n`);
}
