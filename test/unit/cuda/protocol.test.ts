import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ARG_INDEX, ARG_VIEWS, OPS, OP_ROWS, PROTO_HASH, PROTOCOL, decodeHeader, decodeReply, encodeFrame, formatEndpoint, parseEndpoint } from '../../../src/cuda/protocol/index.js';
import { imageFits } from '../../../src/cuda/daemon/ops/modules.js';

describe('CUDA protocol spec', () => {
  it('op ids are unique and the generated tables mirror the spec', () => {
    expect(new Set(OPS.map((o) => o.id)).size).toBe(OPS.length);
    expect(new Set(OPS.map((o) => o.name)).size).toBe(OPS.length);
    expect(OP_ROWS.map((r) => [r.id, r.nargs, r.nouts, r.async])).toEqual(OPS.map((o) => [o.id, o.args.length, o.outs.length, !!o.async]));
    expect(OPS.every((o) => o.id > 0 && o.id < 2 ** 16)).toBe(true); // the header carries the op as a u16
  });

  it('the C header carries the same hash and sizes as the TypeScript tables', () => {
    const h = fs.readFileSync(path.resolve(import.meta.dirname, '../../../shims/cuda/smol_protocol.h'), 'utf8');
    expect(BigInt(/SMOL_PROTO_HASH (0x[0-9a-f]+)ull/.exec(h)![1])).toBe(PROTO_HASH);
    expect(Number(/SMOL_MAX_PAYLOAD (\d+)u/.exec(h)![1])).toBe(PROTOCOL.maxPayload);
    expect(Number(PROTO_HASH)).toBe(Number(PROTO_HASH.toString())); // exact as a JS number
    expect(PROTO_HASH < 2n ** 53n).toBe(true);
  });

  it('each op\'s argument view reads the word the spec puts its name at', () => {
    const words = Array.from({ length: 16 }, (_, i) => 100 + i);
    for (const o of OPS) {
      const view = new ARG_VIEWS[o.name as keyof typeof ARG_VIEWS]().at(words) as unknown as Record<string, number>;
      expect(o.args.map((a) => view[a]), o.name).toEqual(o.args.map((_, i) => 100 + i));
      if (o.args.length) expect(ARG_INDEX[o.name as keyof typeof ARG_INDEX], o.name).toEqual(Object.fromEntries(o.args.map((a, i) => [a, i])));
    }
  });

  it('frames are little-endian: length, op, flags, seq, status', () => {
    const f = encodeFrame(30, [4096n], { seq: 7, flags: 1, blob: Buffer.from('xy') });
    expect([...f.subarray(0, 12)]).toEqual([10, 0, 0, 0, 30, 0, 1, 0, 7, 0, 0, 0]);
    expect(decodeHeader(f)).toEqual({ length: 10, op: 30, flags: 1, seq: 7, status: 0 });
    expect(f.readBigUInt64LE(16)).toBe(4096n);
    const rep = decodeReply(34, Buffer.concat([Buffer.from(new BigUint64Array([5n, 9n]).buffer), Buffer.from('z')]));
    expect(rep.outs).toEqual([5n, 9n]);
    expect(rep.blob.toString()).toBe('z');
  });
});

describe('endpoints', () => {
  it('parses the forms the shim and daemon accept and rejects the rest', () => {
    expect(parseEndpoint('unix:/run/smol/cuda.sock')).toEqual({ kind: 'unix', path: '/run/smol/cuda.sock' });
    expect(parseEndpoint('tcp:127.0.0.1:7777')).toEqual({ kind: 'tcp', host: '127.0.0.1', port: 7777 });
    expect(parseEndpoint('vsock:5005')).toEqual({ kind: 'vsock', cid: 0xffffffff, port: 5005 });
    expect(parseEndpoint('vsock:3:5005')).toEqual({ kind: 'vsock', cid: 3, port: 5005 });
    for (const bad of ['unix:', 'tcp:host', 'tcp:h:99999', 'vsock:x', 'http://x', '']) expect(parseEndpoint(bad)).toBeNull();
    expect(formatEndpoint(parseEndpoint('vsock:5005')!)).toBe('vsock:5005');
  });
});

describe('module images', () => {
  it('refuses images whose headers claim more bytes than were sent', () => {
    const fat = Buffer.alloc(64); fat.writeUInt32LE(0xba55ed50, 0); fat.writeUInt16LE(16, 6);
    fat.writeBigUInt64LE(48n, 8); expect(imageFits(fat)).toBe(true);
    fat.writeBigUInt64LE(49n, 8); expect(imageFits(fat)).toBe(false);
    const wrapper = Buffer.alloc(32); wrapper.writeUInt32LE(0x466243b1, 0); expect(imageFits(wrapper)).toBe(false);
    const elf = Buffer.alloc(128); elf.write('\x7fELF', 0, 'latin1'); elf.writeBigUInt64LE(64n, 0x28); elf.writeUInt16LE(64, 0x3a); elf.writeUInt16LE(1, 0x3c);
    expect(imageFits(elf)).toBe(true);
    elf.writeUInt16LE(2, 0x3c); expect(imageFits(elf)).toBe(false);
    expect(imageFits(Buffer.from('.version 9.0\n.entry vecadd'))).toBe(true);
  });
});
