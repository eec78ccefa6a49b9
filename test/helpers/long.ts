/**
 * SMOL_TEST_LONG=1 runs the longer forms of tests that CI runs shortened (more repetitions, bigger payloads,
 * denser sampling): the same assertions, with more chances to catch something rare.
 */
export const longTests = process.env.SMOL_TEST_LONG === '1';

/** `ci` in the suite, `long` under SMOL_TEST_LONG=1. */
export const ciOrLong = <T>(ci: T, long: T): T => (longTests ? long : ci);
