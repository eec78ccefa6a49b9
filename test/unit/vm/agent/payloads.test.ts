import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../../../src/vm/agent/codec.js';
import { decodeError, decodeExit, decodeHello, decodeInfo, decodeU32, encodeConfigure, encodeError, encodeExec, encodeHello, encodePut, encodeResize } from '../../../../src/vm/agent/payloads.js';
import { ConfigureKey, ExecFlag } from '../../../../src/vm/agent/protocol.js';
import { signalName, signalNumber } from '../../../../src/vm/agent/signals.js';

describe('payload layouts', () => {
  it('round-trips HELLO', () => {
    const h = { version: 1, capabilities: 15, maxPayload: 262144, window: 1 << 20, nonce: 0xfffffffe, name: 'smol-host' };
    expect(decodeHello(encodeHello(h))).toEqual(h);
  });

  it('encodes EXEC as counts plus NUL-terminated strings the C side splits', () => {
    const p = encodeExec({ argv: ['sh', '-c', 'echo hi'], env: { A: '1' }, cwd: '/tmp', tty: true, rows: 40, cols: 120 });
    expect(p.readUInt32LE(0)).toBe(ExecFlag.tty);
    expect([p.readUInt16LE(4), p.readUInt16LE(6), p.readUInt32LE(8), p.readUInt32LE(12)]).toEqual([40, 120, 3, 1]);
    expect(p.subarray(16).toString().split('\0')).toEqual(['/tmp', 'sh', '-c', 'echo hi', 'A=1', '']);
  });

  it('refuses NUL bytes in argv', () => {
    expect(() => encodeExec({ argv: ['a\0b'] })).toThrow(RangeError);
  });

  it('decodes EXIT codes and signals', () => {
    const b = Buffer.alloc(8);
    b.writeInt32LE(3, 0);
    expect(decodeExit(b)).toEqual({ code: 3, signo: null });
    b.writeInt32LE(-1, 0);
    b.writeInt32LE(2, 4);
    expect(decodeExit(b)).toEqual({ code: null, signo: 2 });
  });

  it('rejects payloads of the wrong size', () => {
    expect(() => decodeExit(Buffer.alloc(7))).toThrow(ProtocolError);
    expect(() => decodeExit(Buffer.alloc(9))).toThrow(ProtocolError);
    expect(() => decodeInfo(Buffer.alloc(11))).toThrow(ProtocolError);
    expect(() => decodeHello(Buffer.alloc(23))).toThrow(ProtocolError);
    expect(() => decodeHello(Buffer.alloc(24))).toThrow(/magic/);
    expect(() => decodeU32(Buffer.alloc(3), 'WINDOW')).toThrow(/WINDOW/);
    expect(() => decodeError(Buffer.alloc(2))).toThrow(ProtocolError);
  });

  it('round-trips ERROR, INFO, PUT and RESIZE', () => {
    expect(decodeError(encodeError(2, 'no such file'))).toEqual({ code: 2, message: 'no such file' });
    const info = Buffer.alloc(12);
    info.writeBigUInt64LE(5n << 32n, 0);
    info.writeUInt32LE(0o755, 8);
    expect(decodeInfo(info)).toEqual({ size: 5 * 2 ** 32, mode: 0o755 });
    const put = encodePut('/etc/x', 0o100644, 1);
    expect([put.readUInt32LE(0), put.readUInt32LE(4), put.subarray(8).toString()]).toEqual([0o644, 1, '/etc/x']);
    expect([...encodeResize(50, 200)]).toEqual([50, 0, 200, 0]);
  });

  it('encodes CONFIGURE as key/length entries', () => {
    const p = encodeConfigure({ hostname: 'vm1', clock: 1_700_000_000_123 });
    expect(p.readUInt16LE(0)).toBe(ConfigureKey.hostname);
    expect(p.readUInt32LE(4)).toBe(3);
    expect(p.subarray(8, 11).toString()).toBe('vm1');
    expect(p.readUInt16LE(11)).toBe(ConfigureKey.clock);
    expect(p.readBigUInt64LE(19)).toBe(1_700_000_000n);
    expect(p.readUInt32LE(27)).toBe(123_000_000);
  });

  it('encodes the volumes entry as attempts, readahead, then NUL-terminated fields, and refuses an empty or NUL field', () => {
    const p = encodeConfigure({ volumes: { tag: 'smol', attempts: 2000, readAheadKb: 8192, mounts: [{ index: 1, guest: '/w', readonly: false }, { index: 0, guest: '/w/c', readonly: true }] } });
    expect(p.readUInt16LE(0)).toBe(ConfigureKey.volumes);
    expect(p.readUInt32LE(4)).toBe(p.length - 8);
    expect([p.readUInt32LE(8), p.readUInt32LE(12)]).toEqual([2000, 8192]);
    expect(p.subarray(16).toString()).toBe('smol\x001\x00/w\x00rw\x000\x00/w/c\x00ro\x00');
    expect(() => encodeConfigure({ volumes: { tag: 'smol', attempts: 1, readAheadKb: 0, mounts: [{ index: 0, guest: '/a\0b', readonly: false }] } })).toThrow(RangeError);
    expect(() => encodeConfigure({ volumes: { tag: '', attempts: 1, readAheadKb: 0, mounts: [] } })).toThrow(RangeError);
  });

  it('maps signal names and numbers both ways', () => {
    expect(signalNumber('SIGINT')).toBe(2);
    expect(signalNumber('term')).toBe(15);
    expect(signalNumber(9)).toBe(9);
    expect(signalName(2)).toBe('SIGINT');
    expect(signalName(36)).toBe('SIGRTMIN+2');
    expect(() => signalNumber('NOPE')).toThrow(RangeError);
    expect(() => signalNumber(0)).toThrow(RangeError);
  });
});
