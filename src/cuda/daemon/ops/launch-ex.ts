/** Tensor maps, launch attributes and clusters, context and function attributes (ops of spec-areas/launch.ts). */
import type { OpHandlers } from '../session-state.js';

export const launchExOps = {
} satisfies Partial<OpHandlers>;
