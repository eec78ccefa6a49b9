/** Driver entry points for 2D/3D copies, stream memory operations, peer and IPC (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const copySigs = {
} as const satisfies SigTable;
