/** Wire ops for memory pools, async allocation and virtual memory management: ids 140-179, append-only like every op (see spec.ts). */
import type { OpSpec } from '../spec-op.js';

export const poolOpSpecs: readonly OpSpec[] = [
];
