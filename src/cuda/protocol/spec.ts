/**
 * The one source of the CUDA remoting wire protocol. `scripts/gen-cuda-protocol.ts` turns it into the C
 * header the guest shims include and the TS tables the daemon uses; CI fails when those are stale.
 *
 * Wire format (all little-endian):
 *   header (16 bytes): u32 length of payload, u16 op, u16 flags, u32 seq, i32 status (replies only)
 *   request payload:   `args.length` u64 arguments, then an optional byte blob (the rest)
 *   reply payload:     `outs.length` u64 results, then an optional byte blob
 * Ops are append-only: never renumber, never reuse an id. Changing anything here changes the hash, so a
 * shim and a daemon built from different specs refuse each other at the handshake.
 */
import { fire, op, type OpSpec } from './spec-op.js';
import { graphOpSpecs } from './spec-areas/graphs.js';
import { poolOpSpecs } from './spec-areas/pools.js';
import { copyOpSpecs } from './spec-areas/copies.js';
import { launchOpSpecs } from './spec-areas/launch.js';
import { queryOpSpecs } from './spec-areas/queries.js';

export type { OpSpec };

export const PROTOCOL = {
  magic: 0x534d4f4c, // "SMOL"
  version: 1,
  headerSize: 16,
  /** Largest payload either side accepts; bigger copies are split into chunks of `chunkSize`. */
  maxPayload: 8 * 1024 * 1024 + 4096,
  chunkSize: 4 * 1024 * 1024,
  flags: { async: 1, reply: 2 },
  caps: { paramInfo: 1, asyncAlloc: 2, nvml: 4, libraries: 8 },
  /** Handle-id kinds minted by the guest (high 16 bits of a 64-bit id). */
  kinds: { ctx: 1, module: 2, func: 3, stream: 4, event: 5, library: 6, kernel: 7, graph: 8, graphExec: 9, graphNode: 10, pool: 11, memHandle: 12 },
  /** Primary context ids are kinds.ctx << 48 | primaryBase + device. */
  primaryBase: 0x100,
  /** Device-properties blob: name[256] uuid[16] totalMem u64 then `attrCount` i32 attributes (1-based). */
  attrCount: 160,
} as const;

export const OPS: readonly OpSpec[] = [
  op(1, 'Hello', ['magic', 'protoHash', 'pid', 'caps'], ['driverVersion', 'caps', 'maxPayload', 'deviceCount', 'sessionId']),
  op(2, 'DeviceProps', ['dev'], [], { blobOut: 'name[256] uuid[16] totalMem:u64 attrs:i32[attrCount]' }),
  op(3, 'Nop', []),
  // contexts (ids minted by the guest)
  op(10, 'CtxCreate', ['ctx', 'flags', 'dev']),
  fire(11, 'CtxDestroy', ['ctx']),
  fire(12, 'CtxSetCurrent', ['ctx']),
  op(13, 'CtxSynchronize', []),
  op(14, 'CtxGetDevice', [], ['dev']),
  op(15, 'PrimaryCtxRetain', ['dev']),
  fire(16, 'PrimaryCtxRelease', ['dev']),
  op(17, 'PrimaryCtxGetState', ['dev'], ['flags', 'active']),
  op(18, 'PrimaryCtxSetFlags', ['dev', 'flags']),
  op(19, 'PrimaryCtxReset', ['dev']),
  op(20, 'CtxGetLimit', ['limit'], ['value']),
  op(21, 'CtxSetLimit', ['limit', 'value']),
  op(22, 'CtxGetStreamPriorityRange', [], ['least', 'greatest']),
  op(23, 'CtxGetFlags', [], ['flags']),
  // memory
  op(30, 'MemAlloc', ['bytes'], ['dptr']),
  fire(31, 'MemFree', ['dptr']),
  op(32, 'MemAllocAsync', ['bytes', 'stream'], ['dptr']),
  fire(33, 'MemFreeAsync', ['dptr', 'stream']),
  op(34, 'MemGetInfo', [], ['free', 'total']),
  fire(35, 'MemcpyHtoD', ['dst', 'stream', 'isAsync'], { blobIn: 'bytes to copy' }),
  op(36, 'MemcpyDtoH', ['src', 'bytes', 'stream'], [], { blobOut: 'bytes copied' }),
  fire(37, 'MemcpyDtoD', ['dst', 'src', 'bytes', 'stream', 'isAsync']),
  fire(38, 'Memset', ['dst', 'value', 'elemSize', 'count', 'stream', 'isAsync']),
  op(39, 'MemGetAddressRange', ['dptr'], ['base', 'size']),
  op(40, 'MemcpyHtoDSync', ['dst'], [], { blobIn: 'bytes to copy' }),
  // modules, libraries, functions
  op(50, 'ModuleLoadData', ['module'], [], { blobIn: 'image (fatbin, cubin or NUL-terminated PTX)' }),
  fire(51, 'ModuleUnload', ['module']),
  op(52, 'ModuleGetFunction', ['module', 'func'], ['paramCount'], { blobIn: 'name', blobOut: 'u32 offset,u32 size per param; paramCount 0xffffffff: layout unknown, the blob says why' }),
  op(53, 'ModuleGetGlobal', ['module'], ['dptr', 'bytes'], { blobIn: 'name' }),
  op(54, 'LibraryLoadData', ['library'], [], { blobIn: 'image' }),
  fire(55, 'LibraryUnload', ['library']),
  op(56, 'LibraryGetKernel', ['library', 'kernel'], ['paramCount'], { blobIn: 'name', blobOut: 'u32 offset,u32 size per param; paramCount 0xffffffff: layout unknown, the blob says why' }),
  op(57, 'LibraryGetGlobal', ['library'], ['dptr', 'bytes'], { blobIn: 'name' }),
  op(58, 'FuncGetAttribute', ['func', 'attrib'], ['value']),
  fire(59, 'FuncSetAttribute', ['func', 'attrib', 'value']),
  fire(60, 'FuncSetCacheConfig', ['func', 'config']),
  op(61, 'OccupancyMaxActiveBlocks', ['func', 'blockSize', 'dynSmem', 'flags'], ['numBlocks']),
  op(62, 'OccupancyMaxPotentialBlockSize', ['func', 'dynSmem', 'blockSizeLimit', 'flags'], ['minGridSize', 'blockSize']),
  fire(63, 'LaunchKernel', ['func', 'gx', 'gy', 'gz', 'bx', 'by', 'bz', 'smem', 'stream'], { blobIn: 'packed params per the param layout' }),
  // streams and events (ids minted by the guest, creation needs no round trip)
  fire(70, 'StreamCreate', ['stream', 'flags', 'priority']),
  fire(71, 'StreamDestroy', ['stream']),
  op(72, 'StreamSynchronize', ['stream']),
  op(73, 'StreamQuery', ['stream']),
  fire(74, 'StreamWaitEvent', ['stream', 'event', 'flags']),
  fire(75, 'EventCreate', ['event', 'flags']),
  fire(76, 'EventRecord', ['event', 'stream']),
  op(77, 'EventSynchronize', ['event']),
  op(78, 'EventQuery', ['event']),
  op(79, 'EventElapsedTime', ['start', 'end'], ['msBits']),
  fire(80, 'EventDestroy', ['event']),
  // NVML, answered from the host driver
  op(90, 'NvmlDeviceInfo', ['dev'], ['memTotal', 'memFree', 'memUsed', 'gpuUtil', 'memUtil'], { blobOut: 'pciBusId[32]' }),
  // Each area keeps its ops in its own file, in its own id range (100-139, 140-179, 180-209, 210-249, 250-289).
  ...graphOpSpecs, ...poolOpSpecs, ...copyOpSpecs, ...launchOpSpecs, ...queryOpSpecs,
];

/** Canonical text the protocol hash is computed from (any change to the spec changes it). */
export function canonicalSpec(): string {
  return JSON.stringify({ PROTOCOL, OPS: OPS.map((o) => [o.id, o.name, o.args, o.outs, !!o.async]) });
}
