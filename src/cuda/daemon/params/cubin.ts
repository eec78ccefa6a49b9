/**
 * Kernel parameter layouts from a cubin (the ELF of one SM architecture). Each kernel has a section
 * `.nv.info.<kernel>` of attribute records; its KPARAM_INFO records give every parameter's ordinal,
 * offset and size, the same table the driver reads to build the launch's constant bank.
 */
import { GpuError } from '../../../errors/index.js';
import { LAYOUT_FAILED, type ParamSlot } from './types.js';

// A record is u8 format, u8 attribute, then: nothing (NVAL, 2 pad bytes), a byte (BVAL, padded to
// 2), a u16 (HVAL), or a u16 length and that many bytes (SVAL).
const FMT_SVAL = 4;
const ATTR = { paramCbank: 0x0a, kparamInfo: 0x17, cbankParamSize: 0x19, kparamInfoV2: 0x45 } as const;
const INFO_PREFIX = '.nv.info.';

const bad = (why: string) => new GpuError(`${LAYOUT_FAILED}malformed cubin: ${why}`);

interface Section { name: string; offset: number; size: number }

/** The `.nv.info.<kernel>` sections. A hostile image could point thousands of section names or
 *  bodies at the same bytes; a real cubin never overlaps them, so their total is capped at the image's
 *  size, which keeps the work linear. */
function infoSections(elf: Buffer): Section[] {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46) throw bad('no ELF header');
  if (elf[4] !== 2 || elf[5] !== 1) throw bad('not a 64-bit little-endian ELF');
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const entSize = elf.readUInt16LE(0x3a), count = elf.readUInt16LE(0x3c), strIdx = elf.readUInt16LE(0x3e);
  if (entSize < 64 || shoff + entSize * count > elf.length || strIdx >= count) throw bad('section table out of bounds');
  const header = (i: number) => {
    const h = shoff + i * entSize;
    return { nameOff: elf.readUInt32LE(h), type: elf.readUInt32LE(h + 4), offset: Number(elf.readBigUInt64LE(h + 24)), size: Number(elf.readBigUInt64LE(h + 32)) };
  };
  const str = header(strIdx);
  if (str.offset + str.size > elf.length) throw bad('section names out of bounds');
  const strtab = elf.subarray(str.offset, str.offset + str.size);
  const prefix = Buffer.from(INFO_PREFIX, 'latin1');
  const found = [];
  for (let i = 0; i < count; i++) {
    const s = header(i);
    if (s.nameOff + prefix.length > strtab.length || strtab.compare(prefix, 0, prefix.length, s.nameOff, s.nameOff + prefix.length) !== 0) continue;
    if (s.type === 8 || s.offset + s.size > elf.length) throw bad(`section ${i} extends past the image`);
    found.push(s);
  }
  // Names in offset order, each NUL found by one forward sweep.
  found.sort((a, b) => a.nameOff - b.nameOff);
  let nul = -1, nameBytes = 0, bodyBytes = 0;
  return found.map((s) => {
    if (nul < s.nameOff) nul = strtab.indexOf(0, s.nameOff);
    if (nul < 0) throw bad('section name not terminated');
    nameBytes += nul - s.nameOff; bodyBytes += s.size;
    if (nameBytes > strtab.length || bodyBytes > elf.length) throw bad('.nv.info sections overlap');
    return { name: strtab.toString('latin1', s.nameOff, nul), offset: s.offset, size: s.size };
  });
}

/** One kernel's `.nv.info.<kernel>` records → its parameters in ordinal order. */
function kernelSlots(kernel: string, info: Buffer): ParamSlot[] {
  const byOrdinal = new Map<number, ParamSlot>();
  let total = -1;
  for (let p = 0; p + 4 <= info.length;) {
    const fmt = info[p], attr = info[p + 1];
    const len = fmt === FMT_SVAL ? info.readUInt16LE(p + 2) : 0;
    const body = fmt === FMT_SVAL ? p + 4 : p + 2;
    if (body + len > info.length) throw bad(`record of ${kernel} extends past its section`);
    if ((attr === ATTR.kparamInfo || attr === ATTR.kparamInfoV2) && fmt === FMT_SVAL && len >= 12) {
      const ordinal = info.readUInt16LE(body + 4), offset = info.readUInt16LE(body + 6), word = info.readUInt32LE(body + 8);
      // The first form packs the size into the top 14 bits; the second (used past 4 KiB of
      // parameters) stores it whole.
      const size = attr === ATTR.kparamInfo ? word >>> 18 : word;
      if (byOrdinal.has(ordinal)) throw bad(`parameter ${ordinal} of ${kernel} is described twice`);
      byOrdinal.set(ordinal, { offset, size });
    } else if (attr === ATTR.cbankParamSize && fmt !== FMT_SVAL) {
      total = info.readUInt16LE(body);
    } else if (attr === ATTR.paramCbank && fmt === FMT_SVAL && len >= 8 && total < 0) {
      total = info.readUInt16LE(body + 6);
    }
    p = body + (fmt === FMT_SVAL ? len : 2);
  }
  const slots: ParamSlot[] = [];
  for (let i = 0; i < byOrdinal.size; i++) {
    const s = byOrdinal.get(i);
    if (!s) throw bad(`parameter ${i} of ${kernel} is missing`);
    if (total >= 0 && s.offset + s.size > total) throw bad(`parameter ${i} of ${kernel} ends past its ${total}-byte parameter bank`);
    slots.push(s);
  }
  if (slots.length === 0 && total > 0) throw bad(`${kernel} has a ${total}-byte parameter bank but no parameter records`);
  return slots;
}

/** Every kernel of a cubin with its parameters. Throws GpuError when the ELF is malformed. */
export function cubinParams(elf: Buffer): Map<string, ParamSlot[]> {
  const out = new Map<string, ParamSlot[]>();
  for (const s of infoSections(elf)) {
    const kernel = s.name.slice(INFO_PREFIX.length);
    out.set(kernel, kernelSlots(kernel, elf.subarray(s.offset, s.offset + s.size)));
  }
  return out;
}
