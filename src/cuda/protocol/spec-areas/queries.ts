/** Wire ops for module loading variants and context, stream and module queries: ids 250-289, append-only like every op (see spec.ts). */
import type { OpSpec } from '../spec-op.js';

export const queryOpSpecs: readonly OpSpec[] = [
];
