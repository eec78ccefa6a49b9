/** Child process for atomicity tests: runs one build step so the test can kill -9 it midway. */
import { ensureKernel } from '../../../src/vm/kernel/index.js';
import { resolveImage } from '../../../src/vm/image/index.js';

const [what, home, ref] = process.argv.slice(2);
if (what === 'kernel') await ensureKernel(home);
else if (what === 'image') await resolveImage(ref, home);
else throw new Error(`unknown step ${what}`);
process.stdout.write('done\n');
