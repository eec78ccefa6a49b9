/** Wire ops for memory pools, async allocation and virtual memory management: ids 140-179, append-only like every op (see spec.ts). */
import { fire, op, type OpSpec } from '../spec-op.js';

export const poolOpSpecs: readonly OpSpec[] = [
  // pools (ids minted by the guest; a device's default pool is kinds.pool << 48 | primaryBase + dev)
  op(140, 'MemPoolCreate', ['pool', 'allocType', 'handleTypes', 'locType', 'locId', 'maxSize']),
  fire(141, 'MemPoolDestroy', ['pool']),
  op(142, 'DeviceSetMemPool', ['dev', 'pool']),
  // u64 attributes (4-8) carry their 8 bytes as the blob both ways; `value` is the int attributes' (1-3).
  op(143, 'MemPoolSetAttribute', ['pool', 'attr', 'value']),
  op(144, 'MemPoolGetAttribute', ['pool', 'attr'], ['value']),
  fire(145, 'MemPoolTrimTo', ['pool', 'keep']),
  op(146, 'MemAllocFromPoolAsync', ['bytes', 'pool', 'stream'], ['dptr']),
  op(147, 'MemPoolSetAccess', ['pool', 'locType', 'locId', 'flags']),
  op(148, 'MemPoolGetAccess', ['pool', 'locType', 'locId'], ['flags']),
  // virtual memory management (allocation handles minted by the guest)
  op(150, 'MemGetAllocationGranularity', ['allocType', 'handleTypes', 'locType', 'locId', 'option'], ['granularity']),
  op(151, 'MemAddressReserve', ['size', 'alignment', 'addr', 'flags'], ['ptr']),
  op(152, 'MemAddressFree', ['ptr', 'size']),
  op(153, 'MemCreate', ['handle', 'size', 'allocType', 'handleTypes', 'locType', 'locId', 'allocFlags', 'flags']),
  fire(154, 'MemRelease', ['handle']),
  op(155, 'MemMap', ['ptr', 'size', 'offset', 'handle', 'flags']),
  op(156, 'MemUnmap', ['ptr', 'size']),
  op(157, 'MemSetAccess', ['ptr', 'size', 'locType', 'locId', 'flags']),
  op(158, 'MemGetAccess', ['locType', 'locId', 'ptr'], ['flags']),
];
