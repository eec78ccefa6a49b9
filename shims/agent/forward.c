/* Guest-initiated forwarded streams: unix sockets inside the guest whose connections become
 * CONNECT(service) streams to the host (the CUDA channel where vsock is absent). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "agent.h"

static void mkparents(char *path) {
  for (char *c = path + 1; *c; c++) {
    if (*c != '/') continue;
    *c = 0;
    mkdir(path, 0755);
    *c = '/';
  }
}

/* spec: NAME=PATH */
int forward_add(const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || !eq[1] || g.nfwd >= MAX_FORWARDS) return -1;
  struct forward *f = &g.fwd[g.nfwd];
  f->name = strndup(spec, eq - spec);
  f->path = strdup(eq + 1);
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  if (strlen(f->path) >= sizeof a.sun_path) return -1;
  strcpy(a.sun_path, f->path);
  mkparents(f->path);
  unlink(f->path);
  f->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(f->fd, 64) < 0) {
    logmsg("forward %s: %s: %s", f->name, f->path, strerror(errno));
    return -1;
  }
  g.nfwd++;
  return 0;
}

void forward_accept(struct forward *f) {
  int c = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c < 0) return;
  uint32_t id = GUEST_STREAM_BIT | (++g.guest_seq & 0x7fffffffu);
  struct stream *s = stream_new(id, K_FWD);
  if (!s) { close(c); return; }
  s->sock = s->fd_in = s->fd_out[CH_OUT] = c;
  send_frame(T_CONNECT, 0, id, f->name, strlen(f->name));
}

/* Called as either direction ends; the stream ends when both have. */
void forward_maybe_finish(struct stream *s) {
  if (s->in_eof && s->fd_in >= 0 && buf_used(&s->inq) == 0) {
    shutdown(s->sock, SHUT_WR);
    s->fd_in = -1;
  }
  if (s->fd_in < 0 && s->fd_out[CH_OUT] < 0) stream_free(s);
}
