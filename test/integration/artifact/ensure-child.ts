/** One process of the cross-process cache race: prints whether it was the one that extracted. */
import { ensureExtracted } from '../../../src/artifact/index.js';

const [file, cache] = process.argv.slice(2);
ensureExtracted(file, cache).then((r) => process.stdout.write(JSON.stringify({ extracted: r.extracted, dir: r.dir }) + '\n'));
