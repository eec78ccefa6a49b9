/* The host channel: framing out (one coalesced output buffer), parsing and dispatch in, stream table. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent.h"

void buf_reserve(struct buf *b, size_t n) {
  if (b->cap - b->len >= n) return;
  if (b->off > 0) { /* compact before growing */
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off; b->off = 0;
    if (b->cap - b->len >= n) return;
  }
  size_t cap = b->cap ? b->cap : 65536;
  while (cap - b->len < n) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) { logmsg("out of memory"); _exit(1); }
  b->p = p; b->cap = cap;
}
void buf_append(struct buf *b, const void *data, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, data, n);
  b->len += n;
}
void buf_consume(struct buf *b, size_t n) {
  b->off += n;
  if (b->off == b->len) b->off = b->len = 0;
}
void buf_free(struct buf *b) { free(b->p); memset(b, 0, sizeof *b); }

static void put_header(uint8_t *h, uint8_t type, uint8_t flags, uint32_t id, uint32_t n) {
  wr32(h + HDR_OFF_LENGTH, n); h[HDR_OFF_TYPE] = type; h[HDR_OFF_FLAGS] = flags; h[HDR_OFF_RESERVED] = h[HDR_OFF_RESERVED + 1] = 0; wr32(h + HDR_OFF_STREAM, id);
}

void send_frame(uint8_t type, uint8_t flags, uint32_t id, const void *p, uint32_t n) {
  if (g.chan < 0) return;
  buf_reserve(&g.out, HDR_LEN + n);
  put_header(g.out.p + g.out.len, type, flags, id, n);
  if (n) memcpy(g.out.p + g.out.len + HDR_LEN, p, n);
  g.out.len += HDR_LEN + n;
}

void send_error(uint32_t id, uint32_t code, const char *fmt, ...) {
  char msg[512];
  uint8_t p[ERROR_LEN + sizeof msg];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if (n >= (int)sizeof msg) n = sizeof msg - 1;
  wr32(p + ERROR_OFF_CODE, code);
  memcpy(p + ERROR_LEN, msg, n);
  send_frame(T_ERROR, 0, id, p, ERROR_LEN + n);
}

/* Reads from fd straight into a DATA frame in the output buffer: no intermediate copy. */
ssize_t send_from_fd(uint32_t id, uint8_t ch, int fd, uint32_t max) {
  if (max > MAX_PAYLOAD) max = MAX_PAYLOAD;
  buf_reserve(&g.out, HDR_LEN + max);
  uint8_t *h = g.out.p + g.out.len;
  ssize_t r = read(fd, h + HDR_LEN, max);
  if (r > 0) {
    put_header(h, T_DATA, ch, id, (uint32_t)r);
    g.out.len += HDR_LEN + r;
  }
  return r;
}

int out_has_room(void) { return g.chan >= 0 && !g.hostless && !g.resync && buf_used(&g.out) < OUT_HIGH; }

void flush_out(void) {
  while (g.chan >= 0 && buf_used(&g.out) > 0) {
    ssize_t w = write(g.chan, g.out.p + g.out.off, buf_used(&g.out));
    if (w > 0) { buf_consume(&g.out, w); continue; }
    if (w < 0 && errno == EINTR) continue;
    return; /* EAGAIN: poll for POLLOUT; a hard error shows up as EOF/HUP on the read side */
  }
}

struct stream *stream_find(uint32_t id) {
  for (int i = 0; i < g.nstreams; i++)
    if (g.streams[i]->id == id) return g.streams[i];
  return NULL;
}

struct stream *stream_new(uint32_t id, int kind) {
  if (g.nstreams >= MAX_STREAMS) return NULL;
  struct stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->id = id; s->kind = kind;
  s->fd_in = s->fd_out[0] = s->fd_out[1] = s->fd_out[2] = s->sock = -1;
  s->credit[CH_OUT] = s->credit[CH_ERR] = g.host_window;
  s->in_left = AGENT_WINDOW;
  g.streams[g.nstreams++] = s;
  return s;
}

void stream_free(struct stream *s) {
  for (int i = 0; i < g.nstreams; i++) {
    if (g.streams[i] != s) continue;
    g.streams[i] = g.streams[--g.nstreams];
    break;
  }
  if (s->sock >= 0) close(s->sock);
  else {
    if (s->fd_in >= 0) close(s->fd_in);
    for (int c = 1; c <= 2; c++) if (s->fd_out[c] >= 0) close(s->fd_out[c]);
  }
  buf_free(&s->inq);
  free(s->path); free(s->tmp);
  free(s);
}

/* Credit goes back to the host once input has left our buffers, in batches to save frames. */
void grant_input(struct stream *s, uint32_t n) {
  s->in_unacked += n;
  if (s->in_unacked >= AGENT_WINDOW / 4 || (s->in_unacked > 0 && buf_used(&s->inq) == 0)) {
    uint8_t p[WINDOW_LEN];
    wr32(p + WINDOW_OFF_CREDIT, s->in_unacked);
    s->in_left += s->in_unacked;
    s->in_unacked = 0;
    send_frame(T_WINDOW, CH_IN, s->id, p, WINDOW_LEN);
  }
}

/* Writes host input to fd_in, queueing what would block. Returns -1 if fd_in broke. */
int stream_write_in(struct stream *s, const uint8_t *p, uint32_t n) {
  if (s->in_discard || s->fd_in < 0) { grant_input(s, n); return 0; }
  uint32_t done = 0;
  if (buf_used(&s->inq) == 0) {
    while (done < n) {
      ssize_t w = write(s->fd_in, p + done, n - done);
      if (w > 0) { done += w; continue; }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      s->in_discard = 1;
      grant_input(s, n);
      return -1;
    }
  }
  if (done < n) buf_append(&s->inq, p + done, n - done);
  grant_input(s, done);
  return 0;
}

/* Called when fd_in polls writable. */
void stream_drain_in(struct stream *s) {
  while (buf_used(&s->inq) > 0 && !s->in_discard) {
    ssize_t w = write(s->fd_in, s->inq.p + s->inq.off, buf_used(&s->inq));
    if (w > 0) { buf_consume(&s->inq, w); grant_input(s, w); continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    s->in_discard = 1;
  }
  if (s->in_discard) {
    uint32_t left = buf_used(&s->inq);
    buf_consume(&s->inq, left);
    grant_input(s, left);
  }
  if (buf_used(&s->inq) == 0 && s->in_eof) {
    if (s->kind == K_EXEC) exec_input_eof(s);
    else if (s->kind == K_FWD) forward_maybe_finish(s);
  }
}

void session_reset(void) {
  session_reset_streams();
  g.in.off = g.in.len = 0;
  g.resync = 0;
}

/* Ends every stream and forgets the host, but keeps unparsed input (a HELLO may be followed by more frames). */
void session_reset_streams(void) {
  while (g.nstreams > 0) {
    struct stream *s = g.streams[0];
    if (s->kind == K_EXEC) exec_abort(s);
    else if (s->kind == K_PUT) put_abort(s);
    stream_free(s);
  }
  g.out.off = g.out.len = 0;
  g.handshaken = 0;
  g.host_window = 0;
}

void protocol_error(const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  logmsg("protocol error: %s", msg);
  session_reset_streams();
  send_error(0, ERR_PROTOCOL, "protocol error: %s", msg);
  g.resync = 1; /* main.c closes socket connections; a serial port scans for the next HELLO */
}

static void hello(const uint8_t *p, uint32_t n) {
  if (n < HELLO_MIN || memcmp(p, HELLO_MAGIC, 4) != 0) { protocol_error("malformed HELLO"); return; }
  if (g.handshaken) session_reset_streams(); /* a new host on the same byte stream */
  uint32_t nonce = rd32(p + HELLO_OFF_NONCE); /* echoed, so the host can tell which of its HELLOs this answers */
  uint32_t max = rd32(p + HELLO_OFF_MAX_PAYLOAD);
  g.host_window = rd32(p + HELLO_OFF_WINDOW);
  if (max < MIN_PEER_PAYLOAD || g.host_window == 0) { protocol_error("HELLO: bad limits"); return; }
  if (g.host_window > (1u << 30)) g.host_window = 1u << 30;
  static const char name[] = "smol-agent " "1";
  uint8_t r[HELLO_MIN + sizeof name - 1];
  memcpy(r + HELLO_OFF_MAGIC, HELLO_MAGIC, 4);
  wr32(r + HELLO_OFF_VERSION, PROTO_VERSION);
  wr32(r + HELLO_OFF_CAPABILITIES, CAP_TTY | CAP_FILES | CAP_FORWARD | CAP_CONFIGURE);
  wr32(r + HELLO_OFF_MAX_PAYLOAD, MAX_PAYLOAD);
  wr32(r + HELLO_OFF_WINDOW, AGENT_WINDOW);
  wr32(r + HELLO_OFF_NONCE, nonce);
  memcpy(r + HELLO_MIN, name, sizeof name - 1);
  send_frame(T_HELLO, 0, 0, r, sizeof r);
  g.handshaken = 1;
}

static void on_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t n) {
  if (ch != CH_IN || s->kind == K_GET) { protocol_error("DATA on channel %u of stream %u", ch, s->id); return; }
  if (s->in_eof) { protocol_error("DATA after EOF on stream %u", s->id); return; }
  if (n > s->in_left) { protocol_error("stream %u: %u bytes beyond the window", s->id, n); return; }
  s->in_left -= n;
  if (s->kind == K_PUT) put_data(s, p, n);
  else if (stream_write_in(s, p, n) < 0 && s->kind == K_FWD) {
    send_error(s->id, EPIPE, "forwarded connection closed");
    stream_free(s);
  }
}

static void on_eof(struct stream *s, uint8_t ch) {
  if (ch != CH_IN || s->in_eof) { protocol_error("bad EOF on stream %u", s->id); return; }
  s->in_eof = 1;
  if (s->kind == K_PUT) put_finish(s);
  else if (buf_used(&s->inq) == 0) stream_drain_in(s);
}

static void on_window(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t n) {
  if (n != WINDOW_LEN || (ch != CH_OUT && ch != CH_ERR)) { protocol_error("bad WINDOW"); return; }
  uint64_t c = (uint64_t)s->credit[ch] + rd32(p + WINDOW_OFF_CREDIT);
  s->credit[ch] = c > 0x7fffffffu ? 0x7fffffffu : (uint32_t)c;
}

static void on_abort(struct stream *s) {
  if (s->kind == K_EXEC) exec_abort(s);
  else if (s->kind == K_PUT) put_abort(s);
  stream_free(s);
}

static void dispatch(uint8_t type, uint8_t flags, uint32_t id, const uint8_t *p, uint32_t n) {
  if (type == T_HELLO) { if (id != 0) protocol_error("HELLO on stream %u", id); else hello(p, n); return; }
  if (!g.handshaken) { protocol_error("frame type %u before HELLO", type); return; }
  if (id == 0) {
    if (type == T_PING) send_frame(T_PONG, 0, 0, p, n > PING_MAX ? PING_MAX : n);
    else if (type == T_PONG) return;
    else if (type == T_ERROR) logmsg("host reported an error: %.*s", n > ERROR_LEN ? (int)(n - ERROR_LEN) : 0, (const char *)p + ERROR_LEN);
    else protocol_error("frame type %u on stream 0", type);
    return;
  }
  struct stream *s = stream_find(id);
  switch (type) {
  case T_EXEC: case T_PUT: case T_GET: case T_CONFIGURE: case T_SHUTDOWN:
    if (s || (id & GUEST_STREAM_BIT)) { protocol_error("stream id %u reused or out of range", id); return; }
    if (g.nstreams >= MAX_STREAMS) { send_error(id, EMFILE, "too many streams"); return; }
    if (type == T_EXEC) exec_start(id, p, n);
    else if (type == T_PUT) put_start(id, p, n);
    else if (type == T_GET) get_start(id, p, n);
    else if (type == T_CONFIGURE) configure(id, p, n);
    else shutdown_guest(id, p, n);
    return;
  case T_DATA: case T_EOF: case T_WINDOW: case T_SIGNAL: case T_RESIZE: case T_ERROR:
    if (!s) return; /* the stream already ended here; frames in flight are harmless */
    if (type == T_DATA) on_data(s, flags, p, n);
    else if (type == T_EOF) on_eof(s, flags);
    else if (type == T_WINDOW) on_window(s, flags, p, n);
    else if (type == T_SIGNAL) { if (s->kind == K_EXEC) exec_signal(s, p, n); }
    else if (type == T_RESIZE) { if (s->kind == K_EXEC) exec_resize(s, p, n); }
    else on_abort(s);
    return;
  default:
    protocol_error("unexpected frame type %u from the host", type);
  }
}

/* Offset of the first plausible HELLO frame (header for stream 0 plus the magic), or -1. */
long find_hello(const uint8_t *p, size_t n) {
  for (size_t i = 0; i + HDR_LEN + 4 <= n; i++) {
    const uint8_t *h = p + i;
    uint32_t len = rd32(h + HDR_OFF_LENGTH);
    if (h[HDR_OFF_TYPE] == T_HELLO && h[HDR_OFF_FLAGS] == 0 && rd16(h + HDR_OFF_RESERVED) == 0 && rd32(h + HDR_OFF_STREAM) == 0 &&
        len >= HELLO_MIN && len <= HELLO_MIN + HELLO_NAME_MAX && memcmp(h + HDR_LEN + HELLO_OFF_MAGIC, HELLO_MAGIC, 4) == 0)
      return (long)i;
  }
  return -1;
}

static void parse_input(void) {
  for (;;) {
    if (g.resync) {
      long at = find_hello(g.in.p + g.in.off, buf_used(&g.in));
      if (at < 0) { /* keep a tail that may be the start of a HELLO */
        size_t keep = buf_used(&g.in) < HDR_LEN + 3 ? buf_used(&g.in) : HDR_LEN + 3;
        buf_consume(&g.in, buf_used(&g.in) - keep);
        return;
      }
      buf_consume(&g.in, at);
      g.resync = 0;
    }
    if (buf_used(&g.in) < HDR_LEN) break;
    const uint8_t *h = g.in.p + g.in.off;
    uint32_t n = rd32(h + HDR_OFF_LENGTH);
    if (n > MAX_PAYLOAD) { buf_consume(&g.in, 1); protocol_error("payload of %u bytes exceeds the limit", n); continue; }
    if (h[HDR_OFF_TYPE] == 0 || h[HDR_OFF_TYPE] > T_LAST) { buf_consume(&g.in, 1); protocol_error("unknown frame type %u", h[HDR_OFF_TYPE]); continue; }
    if (rd16(h + HDR_OFF_RESERVED) != 0) { buf_consume(&g.in, 1); protocol_error("reserved header bits set"); continue; }
    if (buf_used(&g.in) < HDR_LEN + n) break;
    buf_consume(&g.in, HDR_LEN + n); /* the bytes stay in place until the next read */
    dispatch(h[HDR_OFF_TYPE], h[HDR_OFF_FLAGS], rd32(h + HDR_OFF_STREAM), h + HDR_LEN, n);
  }
}

/*
 * Reads what the channel has and dispatches every complete frame. Sets hostless on EOF, unless this call read
 * data: a new host's first bytes (its HELLO) can arrive before the guest kernel has handled the port-open
 * message that comes on another queue, so the vport reads as hung up right after them. Taking that EOF as
 * "no host" made the main loop end the session it had just begun when the port had been idle past its
 * grace, and with it the HELLO's answer (about one connect in 30 after 2 s idle).
 */
void handle_input(void) {
  int got = 0;
  for (int reads = 0; reads < 64; reads++) { /* a vport read returns one small buffer: keep going until EAGAIN */
    buf_reserve(&g.in, HDR_LEN + MAX_PAYLOAD);
    ssize_t r = read(g.chan, g.in.p + g.in.len, g.in.cap - g.in.len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) { g.hostless = 0; g.host_open = 1; return; }
    if (r <= 0) { g.hostless = !got; g.host_open = 0; return; }
    got = 1;
    g.hostless = 0;
    g.in.len += r;
    parse_input();
  }
}

void logmsg(const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  dprintf(2, "smol-agent: %.*s", n, line);
}
