/* Wire constants of the smol host<->guest agent protocol. docs/agent-protocol.md is the spec;
 * src/vm/agent/protocol.ts mirrors these numbers. Opcodes are append-only. */
#ifndef SMOL_PROTO_H
#define SMOL_PROTO_H

#define PROTO_VERSION 1
#define HDR_LEN 12
#define MAX_PAYLOAD (256u * 1024u)
#define GUEST_STREAM_BIT 0x80000000u
/* HELLO payloads start with this, so a side can find the peer's HELLO after stale or garbled bytes. */
#define HELLO_MAGIC "SMOL"
#define HELLO_MIN 24

enum frame_type {
  T_HELLO = 1, T_PING = 2, T_PONG = 3, T_EXEC = 4, T_STARTED = 5, T_DATA = 6, T_EOF = 7,
  T_WINDOW = 8, T_EXIT = 9, T_SIGNAL = 10, T_RESIZE = 11, T_ERROR = 12, T_PUT = 13, T_GET = 14,
  T_INFO = 15, T_DONE = 16, T_CONNECT = 17, T_CONFIGURE = 18, T_SHUTDOWN = 19,
  T_LAST = T_SHUTDOWN,
};

/* DATA/EOF/WINDOW carry the channel in the flags byte. Channel 0 flows host->guest, 1 and 2 guest->host. */
enum channel { CH_IN = 0, CH_OUT = 1, CH_ERR = 2 };

#define CAP_TTY 1u
#define CAP_FILES 2u
#define CAP_FORWARD 4u
#define CAP_CONFIGURE 8u

#define EXEC_F_TTY 1u
#define EXEC_F_CLEAR_ENV 2u
#define PUT_F_MKDIRS 1u
#define SHUTDOWN_F_REBOOT 1u

/* CFG_FORK_RELEASE: "DIR\0ENVFILE\0TEXT": write ENVFILE, wake DIR/wait.<pid> FIFOs; DONE then carries u32 woken.
 * CFG_VOLUMES: u32 attempts, u32 readahead KiB, "TAG\0" then per volume "INDEX\0GUEST\0ro|rw\0" (volumes.c). */
enum configure_key { CFG_HOSTNAME = 1, CFG_MACHINE_ID = 2, CFG_ENTROPY = 3, CFG_CLOCK = 4, CFG_FORK_RELEASE = 5, CFG_VOLUMES = 6 };

/* Protocol-level ERROR codes (stream 0 or a stream); per-stream errors otherwise carry the guest errno. */
#define ERR_PROTOCOL 1000u

#endif
