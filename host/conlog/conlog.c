/*
 * smol-conlog: keeps a machine's console log within a size cap.
 *
 *   smol-conlog LOG MAX_BYTES APPEND PIDFILE -- COMMAND [ARG...]
 *
 * The guest is root on its serial port and may write to it forever; QEMU would append all of it to a file.
 * Instead QEMU gets the write end of a pipe as fd 3 (its command line names it with -add-fd), and a keeper
 * process reads the other end and writes LOG, renaming it to LOG.1 (replacing the one before) whenever the
 * next byte would take it past MAX_BYTES: the disk holds at most twice MAX_BYTES. If the keeper falls behind,
 * the pipe fills and QEMU's serial port waits, which only slows the guest.
 *
 * This process forks the keeper (detached in its own session, like QEMU's -daemonize, so it outlives the
 * CLI), writes the keeper's pid to PIDFILE, then execs COMMAND in place: the caller sees COMMAND's exit status and
 * stderr as if it had run it directly. The keeper exits when the last writer (QEMU) closes the pipe.
 * APPEND is 1 to keep LOG's earlier contents (a machine's earlier boots), 0 to start it empty.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define QEMU_FD 3

static const char *log_path;
static char rotated_path[4096];
static unsigned long long max_bytes;

static int open_log(int truncate) {
  /* O_NOFOLLOW: the machine directory is the host's, but a link there is never ours to follow */
  return open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : 0), 0644);
}

/* LOG becomes LOG.1 and a new, empty LOG takes its place; when that fails (the directory was removed),
 * the file is emptied in place, so the cap holds either way. */
static int rotate(int fd) {
  if (rename(log_path, rotated_path) == 0) {
    int nfd = open_log(1);
    if (nfd >= 0) {
      close(fd);
      return nfd;
    }
  }
  if (ftruncate(fd, 0) != 0) { /* nothing left to do: writes below fail and are dropped */ }
  return fd;
}

static void keep(int in, int fd, unsigned long long size) {
  static char buf[64 << 10];
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (ssize_t off = 0; off < n;) {
      if (size >= max_bytes) {
        fd = rotate(fd);
        size = 0;
      }
      size_t room = (size_t)(max_bytes - size);
      size_t len = (size_t)(n - off) < room ? (size_t)(n - off) : room;
      ssize_t w = write(fd, buf + off, len);
      if (w < 0 && errno == EINTR) continue;
      /* a full host disk drops the bytes: the guest's console must not stall on the host's problem */
      if (w <= 0) w = (ssize_t)len;
      off += w;
      size += (unsigned long long)w;
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 7 || strcmp(argv[5], "--") != 0) {
    fprintf(stderr, "usage: smol-conlog LOG MAX_BYTES APPEND(0|1) PIDFILE -- COMMAND [ARG...]\n");
    return 125;
  }
  log_path = argv[1];
  char *end;
  errno = 0;
  max_bytes = strtoull(argv[2], &end, 10);
  if (errno || *end || max_bytes == 0) {
    fprintf(stderr, "smol-conlog: MAX_BYTES must be a positive integer, got '%s'\n", argv[2]);
    return 125;
  }
  int append = strcmp(argv[3], "1") == 0;
  if ((size_t)snprintf(rotated_path, sizeof rotated_path, "%s.1", log_path) >= sizeof rotated_path) {
    fprintf(stderr, "smol-conlog: log path too long: %s\n", log_path);
    return 125;
  }
  int fd = open_log(!append);
  if (fd < 0) {
    fprintf(stderr, "smol-conlog: cannot open %s: %s\n", log_path, strerror(errno));
    return 125;
  }
  struct stat st;
  unsigned long long size = fstat(fd, &st) == 0 ? (unsigned long long)st.st_size : 0;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    fprintf(stderr, "smol-conlog: pipe: %s\n", strerror(errno));
    return 125;
  }
  pid_t keeper = fork();
  if (keeper < 0) {
    fprintf(stderr, "smol-conlog: fork: %s\n", strerror(errno));
    return 125;
  }
  if (keeper == 0) {
    /* QEMU's launcher, this process after exec, never reaps it: it cannot exit first, as that launcher
     * holds the pipe's write end until it exits, and then the keeper is reparented */
    setsid();
    close(p[1]);
    /* the keeper's command line ends at PIDFILE: what finds a machine's QEMU by its command line
     * (pgrep -f 'qemu-system.*DIR') must not find the keeper too */
    for (int i = 5; i < argc; i++) memset(argv[i], 0, strlen(argv[i]));
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (null > 2) close(null);
    }
    signal(SIGHUP, SIG_IGN);
    keep(p[0], fd, size);
    _exit(0);
  }
  FILE *pf = fopen(argv[4], "we");
  int ok = pf && fprintf(pf, "%d\n", (int)keeper) > 0;
  if (pf && fclose(pf) != 0) ok = 0;
  if (!ok) {
    /* the keeper sees the pipe close when this process exits, and exits too */
    fprintf(stderr, "smol-conlog: cannot write %s: %s\n", argv[4], strerror(errno));
    return 125;
  }
  close(p[0]);
  close(fd);
  if (p[1] == QEMU_FD) {
    fcntl(QEMU_FD, F_SETFD, 0);
  } else {
    if (dup2(p[1], QEMU_FD) < 0) {
      fprintf(stderr, "smol-conlog: dup2: %s\n", strerror(errno));
      return 125;
    }
    close(p[1]);
  }
  execvp(argv[6], argv + 6);
  fprintf(stderr, "smol-conlog: cannot run %s: %s\n", argv[6], strerror(errno));
  return 127;
}
