/** Driver entry points for module loading variants and context, stream and module queries (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const querySigs = {
} as const satisfies SigTable;
