/**
 * The fuzz targets' cheap regression mode: each committed seed and each fixed crash (test/fuzz/crashes/
 * <target>/fixed-*) replayed once, then a few hundred generated inputs from a fixed fast-check seed, so
 * what a long `npm run fuzz` found stays fixed. Crashes not fixed yet stay out of this suite (they are
 * listed as skipped tests, from each target's `known`).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { bounded, corpus, fixedCrashes, runTolerant, type FuzzTarget } from '../../fuzz/lib/target.js';
import { targetByName } from '../../fuzz/targets/index.js';

/** Generated runs per target, sized so the whole file stays within a few seconds. */
const RUNS: Record<string, number> = { 'agent-frames': 300, 'cuda-session': 80, artifact: 12, layers: 25, 'blob-get': 100, 'http-get': 100 };

for (const [name, runs] of Object.entries(RUNS)) {
  describe(`fuzz target ${name}`, () => {
    const t: FuzzTarget = targetByName(name);
    let seeds: Buffer[] = [];
    beforeAll(async () => {
      await t.setup?.();
      seeds = [...corpus(name), ...((await t.extraSeeds?.()) ?? [])];
    });
    afterAll(async () => { await t.teardown?.(); });

    for (const k of t.known ?? []) it.skip(`known, reported, not fixed yet: ${k.why}`, () => undefined);

    it('replays its committed corpus and fixed crashes', async () => {
      for (const input of [...seeds, ...fixedCrashes(name).map((c) => c.bytes)]) await bounded(name, t.timeoutMs ?? 5000, () => runTolerant(t, input));
    });

    it(`holds its properties for ${runs} generated inputs (fixed seed)`, async () => {
      await fc.assert(fc.asyncProperty(t.arbitrary(seeds), (input) => bounded(name, t.timeoutMs ?? 5000, () => runTolerant(t, input))), { seed: 20240531, numRuns: runs });
    });
  });
}
