/* smol-agent: the guest side of the smol host<->guest channel (docs/agent-protocol.md).
 * Usage: smol-agent (--port NAME | --vsock PORT | --listen unix:PATH | --connect unix:PATH)
 *                   [--forward SERVICE=PATH]... [--sysroot DIR]
 * One thread, one poll() loop; when it runs as PID 1 it also reaps every orphan. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/vm_sockets.h>
#include <unistd.h>
#include "agent.h"

struct agent g = { .chan = -1 };

enum mode { M_PORT, M_VSOCK, M_LISTEN, M_CONNECT };
static enum mode mode;
static const char *target;
static int listen_fd = -1;

static void usage(void) {
  fprintf(stderr, "usage: smol-agent (--port NAME | --vsock PORT | --listen unix:PATH | --connect unix:PATH)"
                  " [--forward SERVICE=PATH]... [--sysroot DIR]\n");
  exit(64);
}

/* The vport number changes as devices are added, so the port is found by its name. */
static int open_port(const char *name) {
  if (name[0] == '/') return open(name, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  for (int tries = 0; tries < 200; tries++) {
    DIR *d = opendir("/sys/class/virtio-ports");
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char p[512], buf[256];
      snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
      int fd = open(p, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n <= 0) continue;
      buf[n] = 0;
      buf[strcspn(buf, "\n")] = 0;
      if (strcmp(buf, name) != 0) continue;
      snprintf(p, sizeof p, "/dev/%s", e->d_name);
      closedir(d);
      return open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    }
    if (d) closedir(d);
    usleep(50 * 1000); /* the virtio_console module may still be probing */
  }
  errno = ENOENT;
  return -1;
}

static int unix_socket(const char *spec, int do_listen) {
  if (strncmp(spec, "unix:", 5) != 0) usage();
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  if (strlen(spec + 5) >= sizeof a.sun_path) usage();
  strcpy(a.sun_path, spec + 5);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (do_listen) {
    unlink(a.sun_path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0) return -1;
    return fd;
  }
  for (int tries = 0; connect(fd, (struct sockaddr *)&a, sizeof a) < 0; tries++) {
    if (tries >= 100 || (errno != ENOENT && errno != ECONNREFUSED)) return -1;
    usleep(50 * 1000);
  }
  return fd;
}

static int vsock_listen(const char *port) {
  struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = (unsigned)atoi(port) };
  int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0) return -1;
  return fd;
}

static void set_chan(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int sz = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz); /* fails harmlessly on a vport */
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  g.chan = fd;
  g.hostless = g.resync = 0;
}

/* A socket host went away or broke the protocol. (A vport stays open: see the main loop.) */
static void drop_host(void) {
  if (g.resync) flush_out(); /* best effort: tell the host why */
  session_reset();
  if (mode == M_CONNECT) exit(0);
  close(g.chan);
  g.chan = -1;
  g.hostless = g.resync = 0;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* O_ASYNC only while waiting for a host, so connected traffic raises no signals. */
static void set_async(int on) {
  static int cur = 0;
  if (cur == on) return;
  cur = on;
  fcntl(g.chan, F_SETOWN, getpid());
  int fl = fcntl(g.chan, F_GETFL);
  fcntl(g.chan, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC);
}

static void reap(int sfd) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) > 0) {}
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) exec_reaped(pid, st); /* orphans are reaped and ignored */
}

/* Moves one chunk from a stream's output channel to the host. */
static void pump(struct stream *s, int ch) {
  if (s->kind == K_GET) { get_pump(s); return; }
  int fd = s->fd_out[ch];
  ssize_t r = send_from_fd(s->id, ch, fd, s->credit[ch] < 262144 ? s->credit[ch] : 262144);
  if (r > 0) { s->credit[ch] -= r; return; }
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  /* EOF (a pty reports EIO once the last slave closes) */
  send_frame(T_EOF, ch, s->id, NULL, 0);
  s->fd_out[ch] = -1;
  if (s->kind == K_FWD) { forward_maybe_finish(s); return; }
  close(fd);
  exec_maybe_finish(s);
}

enum tag { TG_CHAN, TG_LISTEN, TG_SIG, TG_FWD, TG_OUT, TG_IN };
struct slot { int tag; int idx; uint32_t id; };

int main(int argc, char **argv) {
  int have_mode = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage();
    if (!strcmp(a, "--port")) mode = M_PORT;
    else if (!strcmp(a, "--vsock")) mode = M_VSOCK;
    else if (!strcmp(a, "--listen")) mode = M_LISTEN;
    else if (!strcmp(a, "--connect")) mode = M_CONNECT;
    else if (!strcmp(a, "--forward")) { if (forward_add(v) < 0) { fprintf(stderr, "smol-agent: bad --forward %s\n", v); exit(64); } i++; continue; }
    else if (!strcmp(a, "--sysroot")) { g.sysroot = v; i++; continue; }
    else usage();
    if (have_mode++) usage();
    target = v;
    i++;
  }
  if (!have_mode) usage();
  g.is_pid1 = getpid() == 1;
  while (open("/dev/null", O_RDWR) >= 0 && fcntl(2, F_GETFD) < 0) {} /* keep fds 0-2 taken */
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* reap grandchildren even when not PID 1 */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGIO); /* a vport signals host (dis)connection with SIGIO */
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  if (mode == M_PORT) {
    int fd = open_port(target);
    if (fd < 0) { logmsg("virtio port %s: %s", target, strerror(errno)); return 69; }
    set_chan(fd);
  } else if (mode == M_CONNECT) {
    int fd = unix_socket(target, 0);
    if (fd < 0) { logmsg("connect %s: %s", target, strerror(errno)); return 69; }
    set_chan(fd);
  } else {
    listen_fd = mode == M_VSOCK ? vsock_listen(target) : unix_socket(target, 1);
    if (listen_fd < 0) { logmsg("listen %s: %s", target, strerror(errno)); return 69; }
  }

  struct pollfd pf[3 + MAX_FORWARDS + 3 * MAX_STREAMS];
  struct slot sl[3 + MAX_FORWARDS + 3 * MAX_STREAMS];
  long hostless_since = 0;
  for (;;) {
    if (g.chan >= 0 && mode != M_PORT && (g.hostless || g.resync)) drop_host();
    if (!g.hostless) flush_out();
    int n = 0, timeout = -1;
    pf[n] = (struct pollfd){ sfd, POLLIN, 0 }; sl[n++] = (struct slot){ TG_SIG, 0, 0 };
    if (g.chan >= 0 && g.hostless) {
      /* A vport without a host polls POLLHUP forever, so wait for SIGIO (host connected) or a timer. The
       * port can also look hostless for a moment while a new host's data is already there: keep the
       * session for a grace period, then end it. */
      if (!hostless_since) hostless_since = now_ms();
      long idle = now_ms() - hostless_since;
      if (idle >= 2000 && (g.handshaken || g.nstreams)) {
        session_reset();
        g.resync = 1; /* a stale partial frame must not swallow the next host's HELLO */
      }
      timeout = idle < 2000 ? (int)(2000 - idle) : 1000;
      set_async(1);
    } else if (g.chan >= 0) {
      hostless_since = 0;
      pf[n] = (struct pollfd){ g.chan, POLLIN | (buf_used(&g.out) ? POLLOUT : 0), 0 };
      sl[n++] = (struct slot){ TG_CHAN, 0, 0 };
    } else if (listen_fd >= 0) {
      pf[n] = (struct pollfd){ listen_fd, POLLIN, 0 }; sl[n++] = (struct slot){ TG_LISTEN, 0, 0 };
    }
    if (g.handshaken && out_has_room())
      for (int i = 0; i < g.nfwd; i++) { pf[n] = (struct pollfd){ g.fwd[i].fd, POLLIN, 0 }; sl[n++] = (struct slot){ TG_FWD, i, 0 }; }
    int room = out_has_room();
    for (int i = 0; i < g.nstreams; i++) {
      struct stream *s = g.streams[i];
      for (int ch = 1; ch <= 2; ch++)
        if (room && s->fd_out[ch] >= 0 && s->credit[ch] > 0) {
          pf[n] = (struct pollfd){ s->fd_out[ch], POLLIN, 0 }; sl[n++] = (struct slot){ TG_OUT, ch, s->id };
        }
      if (s->fd_in >= 0 && buf_used(&s->inq) > 0 && s->kind != K_PUT) {
        pf[n] = (struct pollfd){ s->fd_in, POLLOUT, 0 }; sl[n++] = (struct slot){ TG_IN, 0, s->id };
      }
    }
    int r = poll(pf, n, timeout);
    if (r < 0 && errno != EINTR) { logmsg("poll: %s", strerror(errno)); return 70; }
    if (g.chan >= 0 && g.hostless) handle_input();
    /* SIGIO tells of the port-open message; it stays on until the kernel has had it (see handle_input) */
    if (g.chan >= 0 && !g.hostless && g.host_open) set_async(0);
    for (int i = 0; i < n && r > 0; i++) {
      if (!pf[i].revents) continue;
      struct slot *t = &sl[i];
      if (t->tag == TG_SIG) reap(sfd);
      else if (t->tag == TG_CHAN) {
        if (pf[i].revents & POLLOUT) flush_out();
        if ((pf[i].revents & (POLLHUP | POLLERR)) && !(pf[i].revents & POLLIN) && mode == M_PORT) g.hostless = 1, g.host_open = 0;
        else if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) handle_input();
      } else if (t->tag == TG_LISTEN) {
        int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c >= 0) set_chan(c);
      } else if (t->tag == TG_FWD) forward_accept(&g.fwd[t->idx]);
      else {
        struct stream *s = stream_find(t->id); /* may have ended earlier in this pass */
        if (!s) continue;
        if (t->tag == TG_OUT && s->fd_out[t->idx] == pf[i].fd) pump(s, t->idx);
        else if (t->tag == TG_IN && s->fd_in == pf[i].fd) stream_drain_in(s);
      }
    }
  }
}
