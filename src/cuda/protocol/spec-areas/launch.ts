/** Wire ops for tensor maps, launch attributes and clusters, context and function attributes: ids 210-249, append-only like every op (see spec.ts). */
import type { OpSpec } from '../spec-op.js';

export const launchOpSpecs: readonly OpSpec[] = [
];
