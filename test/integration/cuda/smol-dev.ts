/** Runs the CLI from source (tests spawn `node --import tsx` on this file instead of bin/smol+dist). */
import { main } from '../../../src/cli/main.js';
main(process.argv).then((code) => { process.exitCode = code; });
