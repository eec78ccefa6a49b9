/* PUT and GET streams. PUT writes to a temporary file beside the target and renames it at EOF,
 * so a reader never sees a half-written file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent.h"

static char *path_from(const uint8_t *p, uint32_t n) {
  if (n == 0 || memchr(p, 0, n)) return NULL;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, p, n);
  s[n] = 0;
  return s;
}

/* Makes the directories above path (not path itself), as `mkdir -p "$(dirname path)"`. */
int mkdir_parents(const char *path) {
  char *d = strdup(path);
  if (!d) return -1;
  for (char *c = d + 1; *c; c++) {
    if (*c != '/') continue;
    *c = 0;
    if (mkdir(d, 0755) < 0 && errno != EEXIST) { free(d); return -1; }
    *c = '/';
  }
  free(d);
  return 0;
}

/* PUT payload: u32 mode, u32 flags, path (rest, UTF-8, no NUL). */
void put_start(uint32_t id, const uint8_t *p, uint32_t n) {
  if (n < PUT_LEN + 1) { protocol_error("malformed PUT"); return; }
  uint32_t mode = rd32(p + PUT_OFF_MODE) & 07777, flags = rd32(p + PUT_OFF_FLAGS);
  char *path = path_from(p + PUT_LEN, n - PUT_LEN);
  if (!path) { protocol_error("malformed PUT path"); return; }
  size_t tl = strlen(path) + 32;
  char *tmp = malloc(tl);
  snprintf(tmp, tl, "%s.smol-put-%u", path, id);
  if ((flags & PUT_F_MKDIRS) && mkdir_parents(path) < 0) goto fail;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) goto fail;
  struct stream *s = stream_new(id, K_PUT);
  if (!s) { close(fd); unlink(tmp); errno = EMFILE; goto fail; }
  s->fd_in = fd; s->path = path; s->tmp = tmp; s->mode = mode;
  return;
fail:
  send_error(id, errno, "put %s failed: %s", path, strerror(errno));
  free(path); free(tmp);
}

void put_data(struct stream *s, const uint8_t *p, uint32_t n) {
  uint32_t done = 0;
  while (done < n) {
    ssize_t w = write(s->fd_in, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      send_error(s->id, e, "put %s failed: %s", s->path, strerror(e));
      put_abort(s);
      stream_free(s);
      return;
    }
    done += w;
  }
  s->bytes += n;
  grant_input(s, n);
}

void put_finish(struct stream *s) {
  int e = 0;
  if (fchmod(s->fd_in, s->mode) < 0) e = errno;
  if (close(s->fd_in) < 0 && !e) e = errno;
  s->fd_in = -1;
  if (!e && rename(s->tmp, s->path) < 0) e = errno;
  if (e) {
    unlink(s->tmp);
    send_error(s->id, e, "put %s failed: %s", s->path, strerror(e));
  } else {
    uint8_t p[DONE_PUT_LEN];
    wr64(p + DONE_PUT_OFF_BYTES, s->bytes);
    send_frame(T_DONE, 0, s->id, p, DONE_PUT_LEN);
  }
  stream_free(s);
}

void put_abort(struct stream *s) {
  if (s->tmp) unlink(s->tmp);
}

/* GET payload: path. Reply INFO(u64 size, u32 mode), DATA on channel 1, EOF, DONE. */
void get_start(uint32_t id, const uint8_t *p, uint32_t n) {
  char *path = path_from(p, n);
  if (!path) { protocol_error("malformed GET path"); return; }
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 || fstat(fd, &st) < 0) goto fail;
  if (S_ISDIR(st.st_mode)) { errno = EISDIR; goto fail; }
  struct stream *s = stream_new(id, K_GET);
  if (!s) { errno = EMFILE; goto fail; }
  s->fd_out[CH_OUT] = fd;
  s->path = path;
  uint8_t info[INFO_LEN];
  wr64(info + INFO_OFF_SIZE, S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
  wr32(info + INFO_OFF_MODE, st.st_mode & 07777);
  send_frame(T_INFO, 0, id, info, sizeof info);
  return;
fail:;
  int e = errno;
  if (fd >= 0) close(fd);
  send_error(id, e, "get %s failed: %s", path, strerror(e));
  free(path);
}

/* Moves one chunk while the host has credit; returns 1 if it wants to run again without waiting. */
int get_pump(struct stream *s) {
  if (s->credit[CH_OUT] == 0 || !out_has_room()) return 0;
  ssize_t r = send_from_fd(s->id, CH_OUT, s->fd_out[CH_OUT], s->credit[CH_OUT]);
  if (r > 0) { s->credit[CH_OUT] -= r; return 1; }
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (r < 0) {
    send_error(s->id, errno, "get %s failed: %s", s->path, strerror(errno));
  } else {
    send_frame(T_EOF, CH_OUT, s->id, NULL, 0);
    send_frame(T_DONE, 0, s->id, NULL, 0);
  }
  stream_free(s);
  return 0;
}
