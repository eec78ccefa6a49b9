/** What bin/smol starts before the CLI loads (cli/prefetch.ts): it must import nothing heavy. */

/** Walk an `--image DIR` tree's stat fingerprint in a subprocess now, for the image code to collect later. */
export { startEarlyFingerprint } from '../image/tree-fingerprint.js';
