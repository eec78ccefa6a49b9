/**
 * Kernel parameter layouts read from the image a module or library was loaded from: the fallback for
 * drivers that cannot tell (cuFuncGetParamInfo is CUDA 12.4+) or fail to. The image is parsed at the
 * first lookup that needs it and each part at most once, since cudart looks kernels up one by one.
 */
import { GpuError } from '../../../errors/index.js';
import { cubinParams } from './cubin.js';
import { entryPayload, FATBIN_MAGIC, fatbinEntries, type FatbinEntry } from './fatbin.js';
import { ptxParams } from './ptx.js';
import { LAYOUT_FAILED, type ParamSlot } from './types.js';

export type { ParamSlot } from './types.js';

type Table = Map<string, ParamSlot[]>;
interface Source { what: string; parse?: () => Table; table?: Table; error?: string }

const ELF_MAGIC = 0x7f454c46;
const text = (b: Buffer) => { const nul = b.indexOf(0); return b.toString('latin1', 0, nul < 0 ? b.length : nul); };

export class ImageParams {
  private sources?: Source[];
  /** `arch` (e.g. 90) is the device's SM version: a fatbin's cubin for it is read first. */
  constructor(private readonly image: Buffer, private readonly arch = 0) {}

  /** The kernel's parameters in order. Throws GpuError saying why the image cannot tell. */
  layout(kernel: string): ParamSlot[] {
    const problems: string[] = [];
    for (const s of (this.sources ??= this.list())) {
      if (!s.table && s.error === undefined) {
        try { s.table = s.parse!(); } catch (err) {
          if (!(err instanceof GpuError)) throw err;
          s.error = err.message.replace(LAYOUT_FAILED, '');
        }
      }
      if (s.error !== undefined) { problems.push(s.error); continue; }
      const slots = s.table!.get(kernel);
      if (slots) return slots;
    }
    const why = problems.length
      ? `not in a readable part of the image (${problems.join('; ')})`
      : 'the image has no kernel of that name';
    throw new GpuError(`${LAYOUT_FAILED}${kernel}: ${why}`, { hint: 'Use a driver with cuFuncGetParamInfo (CUDA 12.4 or later), or build without LZ4 compression (nvcc --no-compress).' });
  }

  private list(): Source[] {
    const img = this.image;
    if (img.length >= 4 && img.readUInt32BE(0) === ELF_MAGIC) return [{ what: 'cubin', parse: () => cubinParams(img) }];
    if (img.length < 4 || img.readUInt32LE(0) !== FATBIN_MAGIC) return [{ what: 'PTX', parse: () => ptxParams(text(img)) }];
    let entries: FatbinEntry[];
    try { entries = fatbinEntries(img); } catch (err) {
      if (!(err instanceof GpuError)) throw err;
      return [{ what: 'fatbin', error: err.message.replace(LAYOUT_FAILED, '') }];
    }
    // Every entry comes from the same source, so any of them gives the same layout: prefer the
    // cubin the driver would pick, then other cubins (no text to scan), then PTX.
    const rank = (e: FatbinEntry) => (e.kind === 'elf' ? (e.arch === this.arch ? 0 : 1) : 2);
    return entries
      .filter((e) => e.kind !== 'other')
      .sort((a, b) => rank(a) - rank(b) || b.arch - a.arch)
      .map((e) => {
        const what = e.kind === 'elf' ? `sm_${e.arch} cubin` : `compute_${e.arch} PTX`;
        return { what, parse: () => { const data = entryPayload(e, what); return e.kind === 'elf' ? cubinParams(data) : ptxParams(text(data)); } };
      });
  }
}
