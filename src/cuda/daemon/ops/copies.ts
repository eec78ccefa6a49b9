/** 2D/3D copies and memsets, stream memory operations, peer and IPC queries (ops of spec-areas/copies.ts). */
import type { OpHandlers } from '../session-state.js';

export const copyOps = {
} satisfies Partial<OpHandlers>;
