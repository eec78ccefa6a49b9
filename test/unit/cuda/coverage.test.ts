/**
 * scripts/cuda-coverage.ts's pure parts: the family of an entry point, the docs block, and the usage
 * checker on hand-made driver-usage text (the build-dependent parts: test/integration/cuda/coverage.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { BEGIN, END, answeredExportTables, family, renderUnsupported, replaceBlock, usageGaps, type ShimSymbols } from '../../../scripts/cuda-coverage.js';

const sym: ShimSymbols = {
  exported: ['cuInit', 'cuMemAlloc_v2', 'cuMemcpyAsync', 'cuArrayCreate_v2', 'cuGraphicsMapResources', 'cuGLCtxCreate'],
  strong: new Set(['cuInit', 'cuMemAlloc_v2', 'cuMemcpyAsync']),
  weak: new Set(['cuArrayCreate_v2', 'cuGraphicsMapResources', 'cuGLCtxCreate']),
};
const CUDART = '6bd5fb6c-5bf4-e74a-8987-d93912fd9df9';

describe('cuda-coverage', () => {
  it('groups entry points by the first word after cu, acronyms included', () => {
    expect(['cuArray3DCreate', 'cuGLCtxCreate', 'cuEGLStreamConsumerConnect', 'cuVDPAUGetDevice', 'cuGraphicsMapResources',
      'cuGraphAddNode', 'cuTexRefSetAddress', 'cuMemcpy2D_v2', 'cuMemAlloc_v2', 'cuIpcOpenMemHandle'].map(family))
      .toEqual(['Array', 'GL', 'EGL', 'VDPAU', 'Graphics', 'Graph', 'Tex', 'Memcpy', 'Mem', 'Ipc']);
  });

  it('renders the counts and each stub with its code, naming any stub that does not answer 801', () => {
    const codes = new Map([['cuArrayCreate_v2', 801], ['cuGraphicsMapResources', 801], ['cuGLCtxCreate', 999]]);
    const b = renderUnsupported(sym, codes);
    expect(b.startsWith(BEGIN) && b.endsWith(END)).toBe(true);
    expect(b).toContain('exports 6 driver entry points and implements 3; the other 3');
    expect(b).toContain('except the 1 marked with another code');
    expect(b).toContain('- `cuGL*` (1): `cuGLCtxCreate` (999)');
    expect(b).toContain('- `cuArray*` (1): `cuArrayCreate_v2`\n');
    expect(b.indexOf('cuArray*')).toBeLessThan(b.indexOf('cuGraphics*'));
  });

  it('replaces only the text between the markers and refuses a document without them', () => {
    const doc = `head\n${BEGIN}\nold\n${END}\ntail\n`;
    expect(replaceBlock(doc, `${BEGIN}\nnew\n${END}`)).toBe(`head\n${BEGIN}\nnew\n${END}\ntail\n`);
    expect(() => replaceBlock('no markers', 'x')).toThrow(/lacks the/);
  });

  it('reads the export-table UUIDs the shim answers, spelled as the interposer logs them', () => {
    const ids = answeredExportTables();
    expect(ids.size).toBeGreaterThanOrEqual(6);
    expect(ids.has(CUDART)).toBe(true);
    const fake = '{ { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10 }, T },';
    expect([...answeredExportTables(fake)]).toEqual(['01020304-0506-0708-090a-0b0c0d0e0f10']);
  });

  it('finds every entry point or export table of a usage file that the shim does not answer', () => {
    const usage = [
      '# matmul: header',
      'call cuInit 1 errors=0',
      'call cuMemAlloc_v2 10 errors=0',
      'call cuMemcpyAsync_ptsz 4 errors=0', // per-thread stream: answered by the default-stream function
      'call cuArrayCreate_v2 2 errors=0',
      'call cuTensorMapEncodeTiled 3 errors=0',
      `export ${CUDART} rc=0 1`,
      'export 00000000-0000-0000-0000-000000000001 rc=0 2',
      'export 00000000-0000-0000-0000-000000000002 rc=500 1', // the real driver refused it too
    ].join('\n');
    expect(usageGaps('matmul.txt', usage, sym, new Set([CUDART]))).toEqual([
      { file: 'matmul.txt', what: 'cuArrayCreate_v2', why: 'a NOT_SUPPORTED stub in the shim' },
      { file: 'matmul.txt', what: 'cuTensorMapEncodeTiled', why: 'not exported by the shim' },
      { file: 'matmul.txt', what: 'export table 00000000-0000-0000-0000-000000000001', why: 'not answered by shims/cuda/exports.c' },
    ]);
    expect(usageGaps('ok.txt', 'call cuInit 1 errors=0\n', sym, new Set())).toEqual([]);
  });
});
