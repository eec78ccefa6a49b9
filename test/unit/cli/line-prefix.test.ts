import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LinePrefixer } from '../../../src/cli/line-prefix.js';

function sink() {
  const out = new PassThrough();
  const chunks: string[] = [];
  out.on('data', (d: Buffer) => chunks.push(d.toString()));
  return { out, chunks };
}
const write = (p: LinePrefixer, s: string) => new Promise<void>((r) => p.write(Buffer.from(s), () => r()));

describe('LinePrefixer (exec --stream)', () => {
  it('writes whole prefixed lines only, holding a partial line until its newline', async () => {
    const { out, chunks } = sink();
    const p = new LinePrefixer('[vm1] ', out);
    await write(p, 'a\nb');
    await write(p, 'c\n\nd');
    expect(chunks).toEqual(['[vm1] a\n', '[vm1] bc\n[vm1] \n']);
    p.flush();
    expect(chunks.at(-1)).toBe('[vm1] d\n');
    p.flush();
    expect(chunks).toHaveLength(3);
  });

  it('never splits a multi-byte character across a chunk boundary', async () => {
    const { out, chunks } = sink();
    const p = new LinePrefixer('> ', out);
    const euro = Buffer.from('€\n');
    await new Promise<void>((r) => p.write(euro.subarray(0, 1), () => r()));
    await new Promise<void>((r) => p.write(euro.subarray(1), () => r()));
    expect(chunks).toEqual(['> €\n']);
  });
});
