/**
 * SMOL_TEST_LONG=1 runs the longer forms of tests that CI runs shortened (more repetitions, bigger payloads,
 * denser sampling): the same assertions, with more chances to catch something rare. Where it applies:
 * boot/boot.test.ts (10 boots in a row, not 4), vm/net.test.ts (a 100 MiB published download, not 16),
 * fork/points.test.ts (6 saves under the chain cap, not 4), unit/artifact/verify.test.ts (every 211th byte
 * and the whole footer flipped, not every 509th and the footer's fixed fields).
 */
export const longTests = process.env.SMOL_TEST_LONG === '1';

/** `ci` in the suite, `long` under SMOL_TEST_LONG=1. */
export const ciOrLong = <T>(ci: T, long: T): T => (longTests ? long : ci);
