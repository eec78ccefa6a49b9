/** Wire ops for tensor maps, launch attributes and clusters, context and function attributes: ids 210-249, append-only like every op (see spec.ts). */
import { fire, op, type OpSpec } from '../spec-op.js';

const CONFIG = ['gx', 'gy', 'gz', 'bx', 'by', 'bz', 'smem', 'stream', 'nattrs'];
const ATTRS = 'nattrs CUlaunchAttribute records of 72 bytes (u32 id, pad, 64-byte value; an event is the guest id)';

export const launchOpSpecs: readonly OpSpec[] = [
  // kind 0 tiled, 1 im2col, 2 im2col wide
  op(210, 'TensorMapEncode', ['kind', 'dtype', 'rank', 'addr', 'interleave', 'swizzle', 'l2', 'oob'], [], {
    blobIn: 'dims u64[5] strides u64[4] box u32[5] elementStrides u32[5] lower i32[3] upper i32[3] channelsPerPixel u32 pixelsPerColumn u32 mode u32 (148 bytes)',
    blobOut: 'the 128-byte descriptor',
  }),
  op(211, 'TensorMapReplaceAddress', ['addr'], [], { blobIn: 'the 128-byte descriptor', blobOut: 'the 128-byte descriptor' }),
  fire(212, 'LaunchKernelEx', ['func', ...CONFIG], { blobIn: `${ATTRS}, then the packed params per the param layout` }),
  // which 0: cuOccupancyMaxPotentialClusterSize, 1: cuOccupancyMaxActiveClusters
  op(213, 'OccupancyCluster', ['which', 'func', ...CONFIG], ['value'], { blobIn: ATTRS }),
  op(214, 'OccupancyAvailableDynamicSMem', ['func', 'numBlocks', 'blockSize'], ['bytes']),
];
