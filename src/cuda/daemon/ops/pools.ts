/** Memory pools, async allocation from pools and virtual memory management (ops of spec-areas/pools.ts). */
import type { OpHandlers } from '../session-state.js';

export const poolOps = {
} satisfies Partial<OpHandlers>;
