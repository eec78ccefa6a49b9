/** Stream capture and graphs (ops of spec-areas/graphs.ts). */
import type { OpHandlers } from '../session-state.js';

export const graphOps = {
} satisfies Partial<OpHandlers>;
