/** Module loading variants and context, stream and module queries (ops of spec-areas/queries.ts). */
import type { OpHandlers } from '../session-state.js';

export const queryOps = {
} satisfies Partial<OpHandlers>;
