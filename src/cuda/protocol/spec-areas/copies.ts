/** Wire ops for 2D/3D copies and memsets, stream memory operations, peer and IPC queries: ids 180-209, append-only like every op (see spec.ts). */
import type { OpSpec } from '../spec-op.js';

export const copyOpSpecs: readonly OpSpec[] = [
];
