/* CONFIGURE's volumes key: mounts a restored guest's virtiofs volumes once the host has plugged the device
 * (src/vm/volumes/hotplug.ts). /init's smol.vols block does the same with busybox at a cold boot; here it is
 * done without a process, since every fork+exec in a just-restored guest costs ~10-20 ms of TCG translation.
 * Payload: u32 attempts, u32 readahead KiB, then NUL-terminated fields: TAG, and per volume INDEX GUEST ro|rw. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "agent.h"

#define VOL_ROOT "/run/smol/vol"

static void rooted(char *out, size_t n, const char *p) { snprintf(out, n, "%s%s", g.sysroot ? g.sysroot : "", p); }

static int mkdirs(const char *path) {
  if (mkdir_parents(path) < 0) return -1;
  return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static void write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (write(fd, text, strlen(text)) < 0) { /* best effort, as /init's line is */ }
  close(fd);
}

/* FUSE caps a mount's readahead at 128 KiB; its bdi is named after the mount's device number. */
static void raise_readahead(const char *mnt, uint32_t kb) {
  struct stat st;
  char p[4200], v[16];
  if (kb == 0 || stat(mnt, &st) < 0) return;
  char rel[96];
  snprintf(rel, sizeof rel, "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev), minor(st.st_dev));
  rooted(p, sizeof p, rel);
  snprintf(v, sizeof v, "%u", kb);
  write_text(p, v);
}

/* The last kernel messages about PCI or virtio, for the error of a device that never appeared. */
static void kernel_hint(char *out, size_t n) {
  static char log[16384];
  out[0] = 0;
  int len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, sizeof log - 1);
  if (len <= 0) return;
  log[len] = 0;
  const char *lines[2] = { 0 };
  for (char *l = log; l && *l;) {
    char *nl = strchr(l, '\n');
    if (nl) *nl = 0;
    if ((strcasestr(l, "pci") || strcasestr(l, "virtio")) && !strstr(l, "tag <")) { lines[0] = lines[1]; lines[1] = l; }
    l = nl ? nl + 1 : NULL;
  }
  /* each line cut to fit: a hint, not the log */
  snprintf(out, n, "%.280s%s%.280s", lines[0] ? lines[0] : "", lines[0] ? " " : "", lines[1] ? lines[1] : "");
}

static const char *field(const char **s, const char *end) {
  const char *z = *s < end ? memchr(*s, 0, (size_t)(end - *s)) : NULL;
  if (!z) return NULL;
  const char *f = *s;
  *s = z + 1;
  return f;
}

int mount_volumes(const uint8_t *p, uint32_t n, char *why, size_t whyn) {
  if (n < CFG_VOLUMES_LEN) { errno = EINVAL; snprintf(why, whyn, "malformed volumes entry"); return -1; }
  uint32_t attempts = rd32(p + CFG_VOLUMES_OFF_ATTEMPTS), ra_kb = rd32(p + CFG_VOLUMES_OFF_READ_AHEAD_KB);
  const char *s = (const char *)p + CFG_VOLUMES_LEN, *end = (const char *)p + n;
  const char *tag = field(&s, end);
  if (!tag || !*tag) { errno = EINVAL; snprintf(why, whyn, "malformed volumes entry"); return -1; }
  char vol[4200];
  rooted(vol, sizeof vol, VOL_ROOT);
  if (mkdirs(vol) < 0) { snprintf(why, whyn, "cannot make %s: %s", VOL_ROOT, strerror(errno)); return -1; }
  char rescan[4200];
  rooted(rescan, sizeof rescan, "/sys/bus/pci/rescan");
  /* the port has no power controller, so the rescan finds the plugged device and virtio_pci binds it before the
   * write returns; until the host's plug lands, mount fails (no such tag) and the loop waits 10 ms */
  uint32_t i;
  int err = 0;
  for (i = 0; i < attempts; i++) {
    write_text(rescan, "1");
    /* the binds below inherit nosuid,nodev; a remount must repeat them or it clears them */
    if (mount(tag, vol, "virtiofs", MS_NOSUID | MS_NODEV, NULL) == 0) break;
    err = errno;
    usleep(10 * 1000);
  }
  if (i == attempts) {
    char hint[600];
    kernel_hint(hint, sizeof hint);
    errno = err ? err : ETIMEDOUT;
    snprintf(why, whyn, "the virtiofs device did not appear within %u ms (mount: %s)%s%s", attempts * 10, strerror(errno), *hint ? "; kernel: " : "", hint);
    return -1;
  }
  raise_readahead(vol, ra_kb);
  while (s < end) {
    const char *idx = field(&s, end), *guest = field(&s, end), *mode = field(&s, end);
    if (!idx || !guest || !mode || guest[0] != '/') { errno = EINVAL; snprintf(why, whyn, "malformed volumes entry"); return -1; }
    char src[4400], dst[4200];
    snprintf(src, sizeof src, "%s/%s", vol, idx);
    rooted(dst, sizeof dst, guest);
    if (mkdirs(dst) < 0 || mount(src, dst, NULL, MS_BIND, NULL) < 0) {
      snprintf(why, whyn, "cannot mount volume %s on %s: %s", idx, guest, strerror(errno));
      return -1;
    }
    if (!strcmp(mode, "ro") && mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
      snprintf(why, whyn, "cannot make volume %s read-only: %s", guest, strerror(errno));
      return -1;
    }
  }
  return 0;
}
