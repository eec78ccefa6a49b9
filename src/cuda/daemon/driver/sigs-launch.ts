/** Driver entry points for tensor maps, launch attributes, context and function attributes (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const launchSigs = {
} as const satisfies SigTable;
