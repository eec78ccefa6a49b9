/* CONFIGURE (identity, entropy and clock for a fresh or forked guest) and SHUTDOWN. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>
#include "agent.h"

static int write_file(const char *rel, const uint8_t *p, uint32_t n, int newline) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", g.sysroot ? g.sysroot : "", rel);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  ssize_t w = write(fd, p, n);
  if (w == (ssize_t)n && newline) w = write(fd, "\n", 1) == 1 ? w : -1;
  int e = errno;
  close(fd);
  errno = e;
  return w == (ssize_t)n ? 0 : -1;
}

static int add_entropy(const uint8_t *p, uint32_t n) {
  int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  /* RNDADDENTROPY credits the pool (needs CAP_SYS_ADMIN); a plain write still mixes the bytes in. */
  struct rand_pool_info *r = malloc(sizeof *r + n);
  int rc = -1;
  if (r) {
    r->entropy_count = (int)n * 8;
    r->buf_size = (int)n;
    memcpy(r->buf, p, n);
    rc = ioctl(fd, RNDADDENTROPY, r);
    free(r);
  }
  if (rc < 0) rc = write(fd, p, n) == (ssize_t)n ? 0 : -1;
  /* Adding entropy alone leaves an initialised CRNG on its old key until its next scheduled reseed (up to a
   * minute), so a restored snapshot or fork clone would keep producing the parent's stream: rekey it now. */
  if (rc == 0) ioctl(fd, RNDRESEEDCRNG);
  close(fd);
  return rc;
}

/* CONFIGURE payload: entries of (u16 key, u16 reserved, u32 length, bytes). */
void configure(uint32_t id, const uint8_t *p, uint32_t n) {
  uint32_t off = 0;
  while (off < n) {
    if (n - off < 8 || rd32(p + off + 4) > n - off - 8) { protocol_error("malformed CONFIGURE"); return; }
    uint16_t key = rd16(p + off);
    uint32_t len = rd32(p + off + 4);
    const uint8_t *v = p + off + 8;
    off += 8 + len;
    int rc = 0;
    const char *what = "configure";
    switch (key) {
    case CFG_HOSTNAME:
      what = "hostname";
      rc = sethostname((const char *)v, len);
      if (rc == 0) write_file("/etc/hostname", v, len, 1); /* best effort: /etc may be read-only */
      break;
    case CFG_MACHINE_ID:
      what = "machine-id";
      rc = write_file("/etc/machine-id", v, len, 1);
      break;
    case CFG_ENTROPY:
      what = "entropy";
      rc = add_entropy(v, len);
      break;
    case CFG_CLOCK: {
      what = "clock";
      if (len != 12) { errno = EINVAL; rc = -1; break; }
      struct timespec ts = { .tv_sec = (time_t)rd64(v), .tv_nsec = rd32(v + 8) };
      rc = clock_settime(CLOCK_REALTIME, &ts);
      break;
    }
    default:
      errno = ENOTSUP; rc = -1;
    }
    if (rc < 0) { send_error(id, errno, "configure %s failed: %s", what, strerror(errno)); return; }
  }
  send_frame(T_DONE, 0, id, NULL, 0);
}

/* Flushes DONE to the host (bounded wait) before the guest goes away. */
static void flush_blocking(void) {
  for (int i = 0; i < 100 && g.chan >= 0 && buf_used(&g.out) > 0; i++) {
    flush_out();
    struct pollfd pf = { .fd = g.chan, .events = POLLOUT };
    if (buf_used(&g.out) > 0) poll(&pf, 1, 10);
  }
}

void shutdown_guest(uint32_t id, const uint8_t *p, uint32_t n) {
  uint32_t flags = n >= 4 ? rd32(p) : 0;
  send_frame(T_DONE, 0, id, NULL, 0);
  flush_blocking();
  sync();
  if (!g.is_pid1) exit(0);
  kill(-1, SIGTERM);
  usleep(100 * 1000);
  kill(-1, SIGKILL);
  sync();
  reboot(flags & SHUTDOWN_F_REBOOT ? RB_AUTOBOOT : RB_POWER_OFF);
  logmsg("reboot failed: %s", strerror(errno));
  _exit(1);
}
