/** Wire ops for stream capture and graphs: ids 100-139, append-only like every op (see spec.ts). */
import type { OpSpec } from '../spec-op.js';

export const graphOpSpecs: readonly OpSpec[] = [
];
