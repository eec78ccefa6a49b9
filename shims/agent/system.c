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
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

#define HOSTS_MARK "# written by smol (the image has no /etc/hosts)\n"

/* Keeps /etc/hosts naming the current hostname, but only one smol wrote (the image had none): a
 * restored snapshot or a clone gets a new hostname after the init wrote the file. */
static void update_hosts(const uint8_t *name, uint32_t n) {
  char path[4096], head[sizeof HOSTS_MARK];
  snprintf(path, sizeof path, "%s/etc/hosts", g.sysroot ? g.sysroot : "");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r = read(fd, head, sizeof head - 1);
    close(fd);
    if (r < (ssize_t)strlen(HOSTS_MARK) || memcmp(head, HOSTS_MARK, strlen(HOSTS_MARK)) != 0) return;
  } else if (errno != ENOENT) return;
  char text[512];
  int len = snprintf(text, sizeof text, HOSTS_MARK "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%.*s\n", (int)(n > 253 ? 253 : n), (const char *)name);
  if (len > 0 && len < (int)sizeof text) write_file("/etc/hosts", (const uint8_t *)text, (uint32_t)len, 0);
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

static int write_fifo(const char *path) {
  /* a waiter between mkfifo and its open: give it up to ~200 ms instead of blocking the agent on it */
  for (int i = 0; i < 200; i++) {
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t w = write(fd, "go\n", 3);
      close(fd);
      return w == 3 ? 0 : -1;
    }
    if (errno != ENXIO) return -1;
    usleep(1000);
  }
  return -1;
}

/* The fork-point release natively: what the RELEASE_SCRIPT of src/vm/fork/guest.ts does with /bin/sh, without
 * starting a shell in a clone whose translation cache is still empty (a fork+exec there costs ~100 ms under TCG). */
static int fork_release(const uint8_t *p, uint32_t n, uint32_t *woken) {
  const char *end = (const char *)p + n;
  const char *dir = (const char *)p;
  const char *z1 = memchr(dir, 0, n);
  const char *envf = z1 ? z1 + 1 : end;
  const char *z2 = envf < end ? memchr(envf, 0, (size_t)(end - envf)) : NULL;
  if (!z2 || !*dir || !*envf || strlen(dir) > 1024 || strlen(envf) > 1024) { errno = EINVAL; return -1; }
  const char *text = z2 + 1;
  const char *root = g.sysroot ? g.sysroot : "";
  char d[2048], tmp[1100], a[3200], b[3200], path[2400];
  snprintf(d, sizeof d, "%s%s", root, dir);
  for (char *s = d + strlen(root) + 1; *s; s++) if (*s == '/') { *s = 0; mkdir(d, 0755); *s = '/'; }
  if (mkdir(d, 0755) < 0 && errno != EEXIST) return -1;
  snprintf(tmp, sizeof tmp, "%s.tmp", envf);
  if (write_file(tmp, (const uint8_t *)text, (uint32_t)(end - text), 0) < 0) return -1;
  snprintf(a, sizeof a, "%s%s", root, tmp);
  snprintf(b, sizeof b, "%s%s", root, envf);
  if (rename(a, b) < 0) return -1;
  *woken = 0;
  DIR *dh = opendir(d);
  if (!dh) return 0;
  struct dirent *e;
  while ((e = readdir(dh))) {
    if (strncmp(e->d_name, "wait.", 5) != 0) continue;
    snprintf(path, sizeof path, "%s/%.255s", d, e->d_name);
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISFIFO(st.st_mode)) continue;
    long pid = strtol(e->d_name + 5, NULL, 10);
    if (pid <= 0 || kill((pid_t)pid, 0) < 0) { unlink(path); continue; } /* its waiter is gone */
    if (write_fifo(path) == 0) (*woken)++;
  }
  closedir(dh);
  return 0;
}

/* CONFIGURE payload: entries of (u16 key, u16 reserved, u32 length, bytes). */
void configure(uint32_t id, const uint8_t *p, uint32_t n) {
  uint32_t off = 0, woken = 0;
  int released = 0;
  char why[1024];
  while (off < n) {
    if (n - off < CFG_ENTRY_LEN || rd32(p + off + CFG_ENTRY_OFF_LENGTH) > n - off - CFG_ENTRY_LEN) { protocol_error("malformed CONFIGURE"); return; }
    uint16_t key = rd16(p + off + CFG_ENTRY_OFF_KEY);
    uint32_t len = rd32(p + off + CFG_ENTRY_OFF_LENGTH);
    const uint8_t *v = p + off + CFG_ENTRY_LEN;
    off += CFG_ENTRY_LEN + len;
    int rc = 0;
    const char *what = "configure";
    why[0] = 0;
    switch (key) {
    case CFG_HOSTNAME:
      what = "hostname";
      rc = sethostname((const char *)v, len);
      if (rc == 0) write_file("/etc/hostname", v, len, 1); /* best effort: /etc may be read-only */
      if (rc == 0) update_hosts(v, len);
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
      if (len != CFG_CLOCK_LEN) { errno = EINVAL; rc = -1; break; }
      struct timespec ts = { .tv_sec = (time_t)rd64(v + CFG_CLOCK_OFF_SECONDS), .tv_nsec = rd32(v + CFG_CLOCK_OFF_NANOS) };
      rc = clock_settime(CLOCK_REALTIME, &ts);
      break;
    }
    case CFG_FORK_RELEASE:
      what = "fork release";
      rc = fork_release(v, len, &woken);
      released = rc == 0;
      break;
    case CFG_VOLUMES:
      what = "volumes";
      rc = mount_volumes(v, len, why, sizeof why);
      break;
    default:
      errno = ENOTSUP; rc = -1;
    }
    if (rc < 0) { send_error(id, errno, "configure %s failed: %s", what, why[0] ? why : strerror(errno)); return; }
  }
  uint8_t w[DONE_RELEASE_LEN] = { (uint8_t)woken, (uint8_t)(woken >> 8), (uint8_t)(woken >> 16), (uint8_t)(woken >> 24) };
  send_frame(T_DONE, 0, id, released ? w : NULL, released ? DONE_RELEASE_LEN : 0);
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
  uint32_t flags = n >= SHUTDOWN_LEN ? rd32(p + SHUTDOWN_OFF_FLAGS) : 0;
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
