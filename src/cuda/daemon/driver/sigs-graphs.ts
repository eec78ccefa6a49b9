/** Driver entry points for stream capture and graphs (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const graphSigs = {
} as const satisfies SigTable;
