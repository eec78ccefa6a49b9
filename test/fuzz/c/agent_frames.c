/* libFuzzer target: the guest agent's reading of host bytes (shims/agent): framing, resync after a
 * protocol error, HELLO, the per-stream rules, and the payload parsers of EXEC, PUT, GET, CONFIGURE
 * (hostname, clock, entropy, fork release, volumes). chan.c is included so its static parser can be
 * driven without a channel; the other agent sources are linked as they are.
 *
 * The agent's system calls that would change this machine (sethostname, clock_settime, mount, kill,
 * files under guest paths, fchmod of a file it opened) are renamed to the fz_ fakes below in the agent's
 * objects (objcopy --redefine-sym in scripts/fuzz.sh; not --wrap, which would reach libFuzzer's own
 * calls too): the parsers run unchanged, their effects go nowhere.
 *
 * Input: byte 0 is the chunk size the rest is delivered in (0: all at once), as reads of a vport would. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <time.h>
#include <stdio.h>
#include "../../../shims/agent/agent.h"
/* chan.c is compiled into this file: its log lines and its call of SHUTDOWN's handler go to fakes too. */
#define dprintf fz_dprintf
#define shutdown_guest fz_shutdown_guest
int fz_dprintf(int fd, const char *fmt, ...);
void fz_shutdown_guest(uint32_t id, const uint8_t *p, uint32_t n);
#include "../../../shims/agent/chan.c"

struct agent g = { .chan = -1 };
static int devnull = -1;

int fz_open(const char *path, int flags, ...) { (void)path; (void)flags; return dup(devnull); }
int fz_mkdir(const char *path, mode_t m) { (void)path; (void)m; return 0; }
int fz_rename(const char *a, const char *b) { (void)a; (void)b; return 0; }
int fz_unlink(const char *p) { (void)p; return 0; }
int fz_fchmod(int fd, mode_t m) { (void)fd; (void)m; return 0; }
DIR *fz_opendir(const char *p) { (void)p; errno = ENOENT; return NULL; }
int fz_sethostname(const char *n, size_t len) { (void)n; (void)len; return 0; }
int fz_clock_settime(clockid_t c, const struct timespec *t) { (void)c; (void)t; return 0; }
int fz_mount(const char *s, const char *t, const char *f, unsigned long fl, const void *d) { (void)s; (void)t; (void)f; (void)fl; (void)d; return 0; }
int fz_klogctl(int t, char *b, int n) { (void)t; (void)b; (void)n; return -1; }
int fz_usleep(useconds_t u) { (void)u; return 0; }
int fz_kill(pid_t p, int s) { (void)p; (void)s; return 0; }
pid_t fz_vfork(void) { errno = EAGAIN; return -1; }
int fz_posix_openpt(int f) { (void)f; errno = EAGAIN; return -1; }
int fz_dprintf(int fd, const char *fmt, ...) { (void)fd; (void)fmt; return 0; }
void fz_shutdown_guest(uint32_t id, const uint8_t *p, uint32_t n) { (void)p; (void)n; send_frame(T_DONE, 0, id, NULL, 0); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (devnull < 0) devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (size < 1) return 0;
  size_t step = data[0] ? data[0] : size - 1;
  data++; size--;
  g.chan = devnull;
  g.sysroot = "/nonexistent/smol-fuzz";
  for (size_t at = 0; at < size; at += step) {
    size_t n = size - at < step ? size - at : step;
    buf_reserve(&g.in, n);
    memcpy(g.in.p + g.in.len, data + at, n);
    g.in.len += n;
    parse_input();
  }
  session_reset();
  g.out.off = g.out.len = 0;
  return 0;
}
