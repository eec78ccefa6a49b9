/** Where one kernel parameter sits in the launch's parameter buffer (what cuFuncGetParamInfo says). */
export interface ParamSlot { offset: number; size: number }

/** Start of every message the image parsers throw, so a caller that nests them can drop it. */
export const LAYOUT_FAILED = 'kernel parameter layout failed: ';
