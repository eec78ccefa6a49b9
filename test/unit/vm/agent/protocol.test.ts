import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generatedFiles, staleFiles } from '../../../../scripts/gen-agent-protocol.js';
import * as P from '../../../../src/vm/agent/protocol.js';
import { CONSTANTS, GROUPS, LAYOUTS } from '../../../../src/vm/agent/spec.js';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
const protoH = readFileSync(path.join(root, 'shims/agent/proto.h'), 'utf8');

/** NAME -> value of every `#define NAME <number expression>` and `NAME = <number>` enum entry of proto.h. */
function cNumbers(text: string): Map<string, number> {
  const out = new Map<string, number>();
  const value = (expr: string) => {
    const factors = expr.replace(/[()]/g, '').split('*').map((f) => f.trim().replace(/(?<=[0-9a-fA-F])(u|ull)$/, ''));
    return factors.every((f) => /^(0x[0-9a-f]+|\d+)$/i.test(f)) ? factors.reduce((a, f) => a * Number(f), 1) : undefined;
  };
  for (const m of text.matchAll(/^#define (\w+) (.+)$/gm)) {
    const v = value(m[2]);
    if (v !== undefined) out.set(m[1], v);
  }
  for (const m of text.matchAll(/^ {2}(\w+) = (\w+),$/gm)) out.set(m[1], out.get(m[2]) ?? Number(m[2]));
  return out;
}

const upper = (n: string) => n.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();

describe('agent protocol, generated from src/vm/agent/spec.ts', () => {
  it('has its generated C header and TS module up to date with the spec (npm run gen:agent)', () => {
    expect(staleFiles()).toEqual([]);
  });

  it('reports a generated file edited by hand as stale', () => {
    const files = new Map(generatedFiles());
    const edited = files.get('shims/agent/proto.h')!.replace('#define PING_MAX 64', '#define PING_MAX 128');
    expect(staleFiles((p) => (p === 'shims/agent/proto.h' ? edited : files.get(p)!))).toEqual(['shims/agent/proto.h']);
  });

  it('gives the agent and the host the same numbers and the same protocol hash', () => {
    const c = cNumbers(protoH);
    expect(c.get('PROTO_HASH')).toBe(P.PROTOCOL_HASH);
    const ts = P as unknown as Record<string, unknown>;
    for (const k of CONSTANTS) {
      if (typeof k.value !== 'string') expect([k.c, c.get(k.c)]).toEqual([k.c, ts[k.ts]]);
      else {
        expect(protoH).toContain(`#define ${k.c} "${k.value}"`);
        expect((ts[k.ts] as Buffer).toString()).toBe(k.value);
      }
    }
    for (const g of GROUPS) {
      for (const [name, v] of Object.entries(ts[g.ts] as Record<string, number>)) expect([name, c.get(g.cPrefix + upper(name))]).toEqual([name, v]);
    }
    const layout = P.Layout as Record<string, { at: Record<string, number>; size: number }>;
    for (const [key, l] of Object.entries(LAYOUTS)) {
      expect(c.get(l.cSize ?? `${l.c}_LEN`)).toBe(layout[key].size);
      for (const [field, off] of Object.entries(layout[key].at)) expect([field, c.get(`${l.c}_OFF_${upper(field)}`)]).toEqual([field, off]);
    }
  });

  // Agents already built into initramfs images and boot snapshots speak version 1 as it shipped: these
  // numbers may gain new neighbours, never change.
  it('keeps every number of version 1 as it shipped', () => {
    expect({ v: P.PROTOCOL_VERSION, hdr: P.HEADER_LENGTH, max: P.MAX_PAYLOAD, bit: P.GUEST_STREAM_BIT, magic: P.HELLO_MAGIC.toString(), hello: P.HELLO_MIN, err: P.ERR_PROTOCOL })
      .toEqual({ v: 1, hdr: 12, max: 262144, bit: 0x80000000, magic: 'SMOL', hello: 24, err: 1000 });
    expect(P.FrameType).toMatchObject({
      hello: 1, ping: 2, pong: 3, exec: 4, started: 5, data: 6, eof: 7, window: 8, exit: 9, signal: 10,
      resize: 11, error: 12, put: 13, get: 14, info: 15, done: 16, connect: 17, configure: 18, shutdown: 19,
    });
    expect(P.Channel).toEqual({ in: 0, out: 1, err: 2 });
    expect(P.Capability).toMatchObject({ tty: 1, files: 2, forward: 4, configure: 8 });
    expect(P.ConfigureKey).toMatchObject({ hostname: 1, machineId: 2, entropy: 3, clock: 4, forkRelease: 5, volumes: 6 });
    expect([P.ExecFlag, P.PutFlag, P.ShutdownFlag]).toEqual([{ tty: 1, clearEnv: 2 }, { mkdirs: 1 }, { reboot: 1 }]);
    const L = P.Layout;
    expect([L.header.at, L.hello.at, L.exec, L.exit, L.resize.at, L.put, L.info, L.configureEntry, L.clock, L.volumes.size]).toEqual([
      { length: 0, type: 4, flags: 5, reserved: 6, stream: 8 },
      { magic: 0, version: 4, capabilities: 8, maxPayload: 12, window: 16, nonce: 20 },
      { at: { flags: 0, rows: 4, cols: 6, argc: 8, envc: 12 }, size: 16 },
      { at: { code: 0, signal: 4 }, size: 8 },
      { rows: 0, cols: 2 },
      { at: { mode: 0, flags: 4 }, size: 8 },
      { at: { size: 0, mode: 8 }, size: 12 },
      { at: { key: 0, reserved: 2, length: 4 }, size: 8 },
      { at: { seconds: 0, nanos: 8 }, size: 12 },
      8,
    ]);
  });
});
