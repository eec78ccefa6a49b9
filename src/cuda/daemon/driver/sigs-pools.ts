/** Driver entry points for memory pools and virtual memory management (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const poolSigs = {
} as const satisfies SigTable;
