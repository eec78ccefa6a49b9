/* Shared state of smol-agent: one poll() loop, one host channel, a table of streams. */
#ifndef SMOL_AGENT_H
#define SMOL_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "proto.h"

/* Bytes live in [off, len) of p; appends go at len. */
struct buf { uint8_t *p; size_t off, len, cap; };
void buf_reserve(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *data, size_t n);
void buf_consume(struct buf *b, size_t n);
void buf_free(struct buf *b);
static inline size_t buf_used(const struct buf *b) { return b->len - b->off; }

enum kind { K_EXEC = 1, K_PUT, K_GET, K_FWD };

struct stream {
  uint32_t id;
  int kind;
  int fd_in;         /* destination of host channel-0 data; -1 once closed */
  int fd_out[3];     /* sources of channels 1 and 2; -1 once at EOF */
  uint32_t credit[3];/* bytes the host still accepts on channels 1 and 2 */
  uint32_t in_left;  /* bytes the host may still send on channel 0 */
  uint32_t in_unacked;
  struct buf inq;    /* channel-0 data waiting for fd_in to become writable */
  int in_eof;        /* host sent EOF on channel 0 */
  int in_discard;    /* fd_in broke (EPIPE): drop further input but keep granting credit */
  pid_t pid;
  int exited, wstatus, tty;
  int sock;          /* K_FWD: the accepted unix socket (fd_in/fd_out alias it) */
  char *path, *tmp;  /* K_PUT */
  uint32_t mode;
  uint64_t bytes;
};

#define MAX_STREAMS 1024
#define MAX_FORWARDS 16

struct forward { char *name, *path; int fd; };

struct agent {
  int chan;            /* connected host channel, -1 when none */
  int handshaken;
  int hostless;        /* the channel reported no host (read 0 / POLLHUP); on a vport this can be a blip */
  int host_open;       /* the last empty read said EAGAIN, not EOF: the kernel knows the host is connected */
  int resync;          /* after a protocol error: discard input until a host HELLO (found by its magic) */
  uint32_t host_window;/* initial credit the host grants per guest->host channel */
  struct buf out, in;
  struct stream *streams[MAX_STREAMS];
  int nstreams;
  uint32_t guest_seq;
  struct forward fwd[MAX_FORWARDS];
  int nfwd;
  int is_pid1;
  const char *sysroot; /* prefix for files CONFIGURE writes (tests point it at a temp dir) */
};
extern struct agent g;

#define OUT_HIGH (2u * 1024u * 1024u)  /* stop reading sources while this much output is queued */

/* chan.c */
void send_frame(uint8_t type, uint8_t flags, uint32_t id, const void *p, uint32_t n);
void send_error(uint32_t id, uint32_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ssize_t send_from_fd(uint32_t id, uint8_t ch, int fd, uint32_t max);
void flush_out(void);
void handle_input(void);
void session_reset(void);
long find_hello(const uint8_t *p, size_t n);
void session_reset_streams(void);
void protocol_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct stream *stream_find(uint32_t id);
struct stream *stream_new(uint32_t id, int kind);
void stream_free(struct stream *s);
void grant_input(struct stream *s, uint32_t n);
int stream_write_in(struct stream *s, const uint8_t *p, uint32_t n);
void stream_drain_in(struct stream *s);
int out_has_room(void);

/* exec.c */
void exec_start(uint32_t id, const uint8_t *p, uint32_t n);
void exec_reaped(pid_t pid, int wstatus);
void exec_maybe_finish(struct stream *s);
void exec_input_eof(struct stream *s);
void exec_signal(struct stream *s, const uint8_t *p, uint32_t n);
void exec_resize(struct stream *s, const uint8_t *p, uint32_t n);
void exec_abort(struct stream *s);

/* files.c */
void put_start(uint32_t id, const uint8_t *p, uint32_t n);
void put_data(struct stream *s, const uint8_t *p, uint32_t n);
void put_finish(struct stream *s);
void put_abort(struct stream *s);
void get_start(uint32_t id, const uint8_t *p, uint32_t n);
int get_pump(struct stream *s);

/* forward.c */
int forward_add(const char *spec);
void forward_accept(struct forward *f);
void forward_maybe_finish(struct stream *s);

/* system.c */
void configure(uint32_t id, const uint8_t *p, uint32_t n);
/* files.c: makes the directories above path, as mkdir -p of its dirname. */
int mkdir_parents(const char *path);
/* volumes.c: mounts the plugged virtiofs volumes; on failure errno is set and why says what failed. */
int mount_volumes(const uint8_t *p, uint32_t n, char *why, size_t whyn);
void shutdown_guest(uint32_t id, const uint8_t *p, uint32_t n);

/* little-endian helpers (the guest is x86-64 or arm64: both little-endian) */
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; __builtin_memcpy(&v, p, 4); return v; }
static inline uint16_t rd16(const uint8_t *p) { uint16_t v; __builtin_memcpy(&v, p, 2); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; __builtin_memcpy(&v, p, 8); return v; }
static inline void wr32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { __builtin_memcpy(p, &v, 8); }

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
