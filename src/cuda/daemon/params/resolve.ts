/**
 * A kernel's parameter layout for the session: the driver's own answer (cuFuncGetParamInfo /
 * cuKernelGetParamInfo, CUDA 12.4+) when it gives one, else what the module's image says.
 */
import { GpuError } from '../../../errors/index.js';
import type { ImageParams } from './index.js';
import type { ParamSlot } from './types.js';

/** cuFuncGetParamInfo's shape as the driver binding exposes it (outputs in one-element arrays). */
export type ParamInfoFn = (host: number, index: number, offset: unknown[], size: unknown[]) => number;

const CUDA_ERROR_INVALID_VALUE = 1;
/** Past this many parameters the guest shim has no room for the layout. */
export const MAX_PARAMS = 256;

export interface Resolved {
  slots?: ParamSlot[];
  /** Why the layout cannot be known: the launch must be refused, never guessed. */
  reason?: string;
  /** Set when the driver did not answer and the image was read instead: why it did not. */
  fallback?: string;
}

export function resolveParams(info: ParamInfoFn | null, host: number, kernel: string, image: () => ImageParams, why = 'the driver has no cuFuncGetParamInfo (CUDA < 12.4)'): Resolved {
  let fallback = why;
  if (info) {
    const off: unknown[] = [0], size: unknown[] = [0];
    const first = info(host, 0, off, size);
    if (first === 0) {
      const slots: ParamSlot[] = [];
      for (let i = 1; ; i++) {
        slots.push({ offset: Number(off[0]), size: Number(size[0]) });
        if (slots.length > MAX_PARAMS || info(host, i, off, size)) break;
      }
      return tooMany(kernel, slots) ?? { slots };
    }
    // Index 0 out of range on a driver that has param info: a kernel without parameters.
    if (first === CUDA_ERROR_INVALID_VALUE) return { slots: [] };
    fallback = `cuFuncGetParamInfo failed with CUDA error ${first}`;
  }
  try {
    const slots = image().layout(kernel);
    return { ...(tooMany(kernel, slots) ?? { slots }), fallback };
  } catch (err) {
    if (!(err instanceof GpuError)) throw err;
    return { reason: err.message, fallback };
  }
}

function tooMany(kernel: string, slots: ParamSlot[]): Resolved | undefined {
  return slots.length > MAX_PARAMS ? { reason: `kernel parameter layout failed: ${kernel}: more than ${MAX_PARAMS} parameters` } : undefined;
}
