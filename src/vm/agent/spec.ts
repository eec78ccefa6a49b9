/**
 * The one source of the host<->guest agent wire protocol (docs/agent-protocol.md). `scripts/gen-agent-protocol.ts`
 * turns it into shims/agent/proto.h (the guest agent) and src/vm/agent/protocol.ts (the host); CI fails when
 * either is stale (scripts/check-generated.sh). Nothing at run time imports this file.
 *
 * Numbers are append-only: a new frame type, configure key or flag gets a new number (and a capability bit);
 * changing a layout bumps `version`. An agent in an old initramfs or boot snapshot speaks version 1 as it was
 * built, so a value that changes here breaks it. The hash covers every value below (not the docs).
 */

export type FieldType = 'u8' | 'u16' | 'u32' | 'i32' | 'u64' | 'magic';

/** A fixed-size head of a payload, packed little-endian in field order; `rest` says what may follow it. */
export interface LayoutSpec {
  /** Prefix of the C names: PREFIX_OFF_FIELD for each offset, PREFIX_LEN for the size. */
  readonly c: string;
  readonly doc: string;
  readonly fields: readonly (readonly [name: string, type: FieldType])[];
  readonly rest?: string;
  /** Names the size already had before the spec (they stay, so the code keeps reading the same). */
  readonly cSize?: string;
  readonly tsSize?: string;
}

export interface ConstantSpec {
  readonly ts: string;
  readonly c: string;
  readonly value: number | string;
  readonly doc: string;
  /** C: an unsigned literal (`u`); a byte count is written in KiB/MiB, a bit in hex, as people read them. */
  readonly unsigned?: boolean;
  readonly form?: 'bytes' | 'hex';
}

export interface GroupSpec {
  readonly ts: string;
  readonly cPrefix: string;
  readonly doc: string;
  /** C: an enum of this name (int constants); without it, unsigned #defines (bit flags). */
  readonly cEnum?: string;
  /** TS: a union type of the values, under this name. */
  readonly tsValueType?: string;
  /** Names for the highest value, for range checks. */
  readonly last?: { readonly c: string; readonly ts: string };
  readonly values: Readonly<Record<string, number>>;
}

export const FIELD_SIZE: Readonly<Record<FieldType, number>> = { u8: 1, u16: 2, u32: 4, i32: 4, u64: 8, magic: 4 };

export const CONSTANTS: readonly ConstantSpec[] = [
  { ts: 'PROTOCOL_VERSION', c: 'PROTO_VERSION', value: 1, doc: 'Both sides refuse a HELLO with another version.' },
  { ts: 'MAX_PAYLOAD', c: 'MAX_PAYLOAD', value: 256 * 1024, unsigned: true, form: 'bytes', doc: 'Largest payload either side may send; a larger length field is a protocol error.' },
  { ts: 'GUEST_STREAM_BIT', c: 'GUEST_STREAM_BIT', value: 0x8000_0000, unsigned: true, form: 'hex', doc: 'Stream ids the guest allocates (forwarded connections) have this bit set.' },
  { ts: 'HELLO_MAGIC', c: 'HELLO_MAGIC', value: 'SMOL', doc: 'HELLO payloads start with this, so each side can find the peer\'s HELLO after stale or garbled bytes (a serial port keeps them).' },
  { ts: 'HELLO_NAME_MAX', c: 'HELLO_NAME_MAX', value: 256, doc: 'Longest name a HELLO may carry; a stale-byte scan takes no longer frame for a HELLO.' },
  { ts: 'MIN_PEER_PAYLOAD', c: 'MIN_PEER_PAYLOAD', value: 64 * 1024, form: 'bytes', doc: 'A HELLO announcing a smaller max payload (or a zero window) is refused.' },
  { ts: 'PING_MAX', c: 'PING_MAX', value: 64, doc: 'A PONG echoes at most this many bytes of its PING.' },
  { ts: 'ERR_PROTOCOL', c: 'ERR_PROTOCOL', value: 1000, unsigned: true, doc: 'ERROR code for protocol violations (stream 0 or a stream); other ERROR codes are the guest\'s errno.' },
  { ts: 'AGENT_WINDOW', c: 'AGENT_WINDOW', value: 1024 * 1024, unsigned: true, form: 'bytes', doc: 'Credit the agent grants per host->guest channel at stream start (announced in its HELLO).' },
  { ts: 'HOST_WINDOW', c: 'HOST_WINDOW', value: 1024 * 1024, unsigned: true, form: 'bytes', doc: 'Credit the host grants per guest->host channel at stream start (announced in its HELLO).' },
  {
    ts: 'OUTBOUND_BUDGET', c: 'OUTBOUND_BUDGET', value: 4 * 1024 * 1024, unsigned: true, form: 'bytes',
    doc: 'Bytes the host lets queue towards a guest that does not read (replies to its PINGs and CONNECTs, WINDOW grants) before it stops reading that guest; it reads again once the queue drained.',
  },
  { ts: 'MAX_GUEST_STREAMS', c: 'MAX_GUEST_STREAMS', value: 64, doc: 'Guest-initiated (CONNECT) streams open at once on one channel; the host refuses more with ERROR.' },
];

export const GROUPS: readonly GroupSpec[] = [
  {
    ts: 'FrameType', cPrefix: 'T_', cEnum: 'frame_type', tsValueType: 'FrameTypeValue', last: { c: 'T_LAST', ts: 'LAST_FRAME_TYPE' }, doc: 'The header\'s type byte; 0 or one above the last is a protocol error.',
    values: {
      hello: 1, ping: 2, pong: 3, exec: 4, started: 5, data: 6, eof: 7, window: 8, exit: 9, signal: 10,
      resize: 11, error: 12, put: 13, get: 14, info: 15, done: 16, connect: 17, configure: 18, shutdown: 19,
    },
  },
  { ts: 'Channel', cPrefix: 'CH_', cEnum: 'channel', tsValueType: 'ChannelValue', doc: 'DATA/EOF/WINDOW carry the channel in the flags byte. Channel 0 flows host->guest, 1 and 2 guest->host.', values: { in: 0, out: 1, err: 2 } },
  { ts: 'Capability', cPrefix: 'CAP_', doc: 'Capability bits of a HELLO.', values: { tty: 1, files: 2, forward: 4, configure: 8 } },
  { ts: 'ExecFlag', cPrefix: 'EXEC_F_', doc: 'EXEC flags.', values: { tty: 1, clearEnv: 2 } },
  { ts: 'PutFlag', cPrefix: 'PUT_F_', doc: 'PUT flags.', values: { mkdirs: 1 } },
  { ts: 'ShutdownFlag', cPrefix: 'SHUTDOWN_F_', doc: 'SHUTDOWN flags.', values: { reboot: 1 } },
  {
    ts: 'ConfigureKey', cPrefix: 'CFG_', cEnum: 'configure_key',
    doc: 'CONFIGURE keys. FORK_RELEASE: "DIR\\0ENVFILE\\0TEXT": write ENVFILE, wake DIR/wait.<pid> FIFOs; DONE then carries u32 woken. VOLUMES: the volumes head, then "TAG\\0" and per volume "INDEX\\0GUEST\\0ro|rw\\0" (volumes.c).',
    values: { hostname: 1, machineId: 2, entropy: 3, clock: 4, forkRelease: 5, volumes: 6 },
  },
];

/** Keyed by the TS name (`Layout.<key>`); the C names come from `c`. */
export const LAYOUTS: Readonly<Record<string, LayoutSpec>> = {
  header: {
    c: 'HDR', cSize: 'HDR_LEN', tsSize: 'HEADER_LENGTH', doc: 'Frame header; the payload follows.',
    fields: [['length', 'u32'], ['type', 'u8'], ['flags', 'u8'], ['reserved', 'u16'], ['stream', 'u32']],
  },
  hello: {
    c: 'HELLO', cSize: 'HELLO_MIN', tsSize: 'HELLO_MIN', doc: 'HELLO (stream 0); the agent echoes the nonce of the host HELLO it answers.',
    fields: [['magic', 'magic'], ['version', 'u32'], ['capabilities', 'u32'], ['maxPayload', 'u32'], ['window', 'u32'], ['nonce', 'u32']], rest: 'UTF-8 name',
  },
  exec: {
    c: 'EXEC', doc: 'EXEC.', fields: [['flags', 'u32'], ['rows', 'u16'], ['cols', 'u16'], ['argc', 'u32'], ['envc', 'u32']],
    rest: 'NUL-terminated cwd (empty: the agent\'s), argv[argc], env[envc] as KEY=VALUE',
  },
  started: { c: 'STARTED', doc: 'STARTED.', fields: [['pid', 'u32']] },
  window: { c: 'WINDOW', doc: 'WINDOW: extra credit on the channel in the flags byte.', fields: [['credit', 'u32']] },
  exit: { c: 'EXIT', doc: 'EXIT: code is -1 when killed by a signal, signal is 0 when it exited.', fields: [['code', 'i32'], ['signal', 'i32']] },
  signal: { c: 'SIGNAL', doc: 'SIGNAL: a Linux signal number.', fields: [['signo', 'u32']] },
  resize: { c: 'RESIZE', doc: 'RESIZE.', fields: [['rows', 'u16'], ['cols', 'u16']] },
  error: { c: 'ERROR', doc: 'ERROR: guest errno, 0 or ERR_PROTOCOL.', fields: [['code', 'u32']], rest: 'UTF-8 message' },
  put: { c: 'PUT', doc: 'PUT.', fields: [['mode', 'u32'], ['flags', 'u32']], rest: 'path (at least one byte)' },
  info: { c: 'INFO', doc: 'INFO, the answer to GET.', fields: [['size', 'u64'], ['mode', 'u32']] },
  donePut: { c: 'DONE_PUT', doc: 'DONE of a PUT: bytes written.', fields: [['bytes', 'u64']] },
  doneRelease: { c: 'DONE_RELEASE', doc: 'DONE of a CONFIGURE with FORK_RELEASE: waiters woken.', fields: [['woken', 'u32']] },
  configureEntry: { c: 'CFG_ENTRY', doc: 'One CONFIGURE entry; a payload is a sequence of them.', fields: [['key', 'u16'], ['reserved', 'u16'], ['length', 'u32']], rest: '`length` bytes of value' },
  clock: { c: 'CFG_CLOCK', doc: 'Value of CFG_CLOCK.', fields: [['seconds', 'u64'], ['nanos', 'u32']] },
  volumes: { c: 'CFG_VOLUMES', doc: 'Head of the value of CFG_VOLUMES.', fields: [['attempts', 'u32'], ['readAheadKb', 'u32']], rest: 'NUL-terminated strings (ConfigureKey doc)' },
  shutdown: { c: 'SHUTDOWN', doc: 'SHUTDOWN.', fields: [['flags', 'u32']] },
};

/** Field offsets and the size of one layout. */
export function layoutOffsets(l: LayoutSpec): { at: Record<string, number>; size: number } {
  const at: Record<string, number> = {};
  let size = 0;
  for (const [name, type] of l.fields) {
    at[name] = size;
    size += FIELD_SIZE[type];
  }
  return { at, size };
}

/** What the protocol hash covers: every value, in order, without the docs (a comment edit keeps the hash). */
export function canonicalSpec(): string {
  return JSON.stringify({
    constants: CONSTANTS.map((c) => [c.ts, c.c, c.value]),
    groups: GROUPS.map((g) => [g.ts, g.cPrefix, g.cEnum ?? null, g.last ?? null, Object.entries(g.values)]),
    layouts: Object.entries(LAYOUTS).map(([k, l]) => [k, l.c, l.cSize ?? null, l.tsSize ?? null, l.fields]),
  });
}
