/**
 * Wire constants of the host<->guest agent protocol (docs/agent-protocol.md). They mirror
 * shims/agent/proto.h; opcodes are append-only and PROTOCOL_VERSION changes on any incompatible change.
 */
export const PROTOCOL_VERSION = 1;
export const HEADER_LENGTH = 12;
/** Largest payload either side may send; a larger length field is a protocol error. */
export const MAX_PAYLOAD = 256 * 1024;
/** Stream ids the guest allocates (forwarded connections) have this bit set. */
export const GUEST_STREAM_BIT = 0x8000_0000;
/** HELLO payloads start with this, so each side can find the peer's HELLO after stale bytes (a serial port keeps them). */
export const HELLO_MAGIC = Buffer.from('SMOL');
export const HELLO_MIN = 24;

export const FrameType = {
  hello: 1,
  ping: 2,
  pong: 3,
  exec: 4,
  started: 5,
  data: 6,
  eof: 7,
  window: 8,
  exit: 9,
  signal: 10,
  resize: 11,
  error: 12,
  put: 13,
  get: 14,
  info: 15,
  done: 16,
  connect: 17,
  configure: 18,
  shutdown: 19,
} as const;
export type FrameTypeValue = (typeof FrameType)[keyof typeof FrameType];
export const LAST_FRAME_TYPE = FrameType.shutdown;

/** DATA/EOF/WINDOW carry a channel in the flags byte: 0 flows host->guest, 1 and 2 guest->host. */
export const Channel = { in: 0, out: 1, err: 2 } as const;
export type ChannelValue = (typeof Channel)[keyof typeof Channel];

export const Capability = { tty: 1, files: 2, forward: 4, configure: 8 } as const;
export const ExecFlag = { tty: 1, clearEnv: 2 } as const;
export const PutFlag = { mkdirs: 1 } as const;
export const ShutdownFlag = { reboot: 1 } as const;
export const ConfigureKey = { hostname: 1, machineId: 2, entropy: 3, clock: 4, forkRelease: 5, volumes: 6 } as const;

/** ERROR code for protocol violations; other ERROR codes are the guest's errno. */
export const ERR_PROTOCOL = 1000;

/** Credit the host grants per guest->host channel at stream start (announced in HELLO). */
export const HOST_WINDOW = 1024 * 1024;
/**
 * Bytes the host lets queue towards a guest that does not read (replies to its PINGs and CONNECTs, WINDOW
 * grants) before it stops reading that guest; it reads again once the queue drained.
 */
export const OUTBOUND_BUDGET = 4 * 1024 * 1024;
/** Guest-initiated (CONNECT) streams open at once on one channel; more are refused with ERROR. */
export const MAX_GUEST_STREAMS = 64;
