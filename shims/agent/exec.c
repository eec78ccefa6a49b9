/* EXEC streams: fork/exec with pipes or a pty, stdout/stderr pumped by main.c under host credit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include "agent.h"

extern char **environ;

/* EXEC payload: u32 flags, u16 rows, u16 cols, u32 argc, u32 envc, then NUL-terminated
 * cwd, argv[argc], env[envc] ("KEY=VALUE"). Returns NULL-terminated vectors pointing into a copy. */
struct exec_req { uint32_t flags; uint16_t rows, cols; char *cwd; char **argv, **env; char *copy; };

static int parse_exec(const uint8_t *p, uint32_t n, struct exec_req *q) {
  memset(q, 0, sizeof *q);
  if (n < EXEC_LEN) return -1;
  q->flags = rd32(p + EXEC_OFF_FLAGS); q->rows = rd16(p + EXEC_OFF_ROWS); q->cols = rd16(p + EXEC_OFF_COLS);
  uint32_t argc = rd32(p + EXEC_OFF_ARGC), envc = rd32(p + EXEC_OFF_ENVC);
  if (argc == 0 || argc > n || envc > n) return -1;
  q->copy = malloc(n - EXEC_LEN + 1);
  q->argv = calloc(argc + 1, sizeof(char *));
  q->env = calloc(envc + 1, sizeof(char *));
  if (!q->copy || !q->argv || !q->env) return -1;
  memcpy(q->copy, p + EXEC_LEN, n - EXEC_LEN);
  q->copy[n - EXEC_LEN] = 0;
  char *c = q->copy, *end = q->copy + (n - EXEC_LEN);
  for (uint32_t i = 0; i < 1 + argc + envc; i++) {
    char *z = memchr(c, 0, end - c);
    if (!z) return -1;
    if (i == 0) q->cwd = c;
    else if (i <= argc) q->argv[i - 1] = c;
    else q->env[i - 1 - argc] = c;
    c = z + 1;
  }
  return c == end ? 0 : -1;
}

static void free_req(struct exec_req *q) { free(q->copy); free(q->argv); free(q->env); }

/* The child's environment: the agent's own (unless cleared) overridden by the request's. */
static char **merge_env(struct exec_req *q) {
  size_t n = 0, m = 0;
  if (!(q->flags & EXEC_F_CLEAR_ENV)) while (environ[n]) n++;
  while (q->env[m]) m++;
  char **e = calloc(n + m + 2, sizeof(char *));
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t kl = strcspn(environ[i], "=");
    int overridden = 0;
    for (size_t j = 0; j < m && !overridden; j++)
      overridden = strncmp(q->env[j], environ[i], kl + 1) == 0;
    if (!overridden) e[k++] = environ[i];
  }
  for (size_t j = 0; j < m; j++) e[k++] = q->env[j];
  int has_path = 0;
  for (size_t i = 0; i < k; i++) has_path |= strncmp(e[i], "PATH=", 5) == 0;
  if (!has_path) e[k++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  return e;
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* PATH lookup with the child's PATH (posix_spawnp would use the agent's). */
static const char *resolve(const char *file, char **envp, char *buf, size_t n) {
  if (strchr(file, '/')) return file;
  const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (char **e = envp; *e; e++) if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  int err = ENOENT;
  for (const char *p = path; ; p = strchr(p, ':') + 1) {
    size_t dl = strcspn(p, ":");
    if (snprintf(buf, n, "%.*s%s%s", (int)dl, p, dl ? "/" : "", file) < (int)n) {
      struct stat st;
      if (stat(buf, &st) == 0 && S_ISREG(st.st_mode)) {
        if (access(buf, X_OK) == 0) return buf;
        err = EACCES;
      }
    }
    if (!p[dl]) break;
  }
  errno = err;
  return NULL;
}

/* vfork: no page-table copy of the agent, which matters under TCG. Not posix_spawn: glibc's leaves its
 * two internal signals (32, 33) SIG_IGN in the child, and SIG_IGN survives exec, so every program
 * would start with them ignored. Here the child resets every ignored signal to its default, whatever
 * the agent inherited (the extra-port agents are started with `&` by a non-interactive sh, which
 * ignores SIGINT and SIGQUIT), unblocks everything, and execs; exec resets handled signals itself. */
static int spawn(struct exec_req *q, char **envp, int tty, const char *slave, int in, int out, int err, pid_t *pid, const char **what) {
  char buf[4096];
  const char *file = resolve(q->argv[0], envp, buf, sizeof buf);
  if (!file) { *what = "not found in PATH"; return errno; }
  if (q->cwd[0] && access(q->cwd, X_OK) < 0) { *what = "working directory"; return errno; }
  sigset_t all, old, none;
  sigfillset(&all);
  sigemptyset(&none);
  /* No handler of the agent's may run in the child while it shares the agent's memory. */
  sigprocmask(SIG_BLOCK, &all, &old);
  volatile int child_err = 0;
  volatile const char *child_what = "spawn";
  pid_t p = vfork();
  if (p == 0) {
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    for (int sig = 1; sig < NSIG; sig++) {
      struct sigaction cur;
      if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &cur) < 0) continue; /* 32, 33: glibc's */
      if (cur.sa_handler == SIG_IGN) sigaction(sig, &dfl, NULL);
    }
    if (setsid() < 0) { child_err = errno; child_what = "setsid"; _exit(127); }
    if (tty) { /* a session leader opening a tty without O_NOCTTY acquires it as controlling terminal */
      int fd = open(slave, O_RDWR);
      if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) { child_err = errno; child_what = "tty"; _exit(127); }
      if (fd > 2) close(fd);
    } else if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) { child_err = errno; child_what = "dup2"; _exit(127); }
    if (q->cwd[0] && chdir(q->cwd) < 0) { child_err = errno; child_what = "working directory"; _exit(127); }
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(file, q->argv, envp);
    child_err = errno; child_what = "spawn";
    _exit(127);
  }
  int rc = p < 0 ? errno : child_err;
  sigprocmask(SIG_SETMASK, &old, NULL);
  *what = (const char *)child_what;
  if (p > 0 && rc) waitpid(p, NULL, 0); /* the child failed before exec: reap it here, report the errno */
  *pid = p;
  return rc;
}

void exec_start(uint32_t id, const uint8_t *p, uint32_t n) {
  struct exec_req q;
  if (parse_exec(p, n, &q) < 0) { free_req(&q); protocol_error("malformed EXEC"); return; }
  int tty = q.flags & EXEC_F_TTY;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int master = -1, rc;
  char slave[128] = "";
  const char *what = "pipe";
  pid_t pid = -1;
  if (tty) {
    what = "pty";
    master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, slave, sizeof slave) != 0) goto fail;
    struct winsize ws = { .ws_row = q.rows ? q.rows : 24, .ws_col = q.cols ? q.cols : 80 };
    ioctl(master, TIOCSWINSZ, &ws);
  } else if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) goto fail;
  if (!tty) fcntl(out[1], F_SETPIPE_SZ, 1 << 20); /* fewer wakeups for fast producers */
  char **envp = merge_env(&q);
  rc = spawn(&q, envp, tty, slave, in[0], out[1], err[1], &pid, &what);
  free(envp);
  if (rc != 0) { errno = rc; goto fail; }
  struct stream *s = stream_new(id, K_EXEC);
  if (!s) { kill(pid, SIGKILL); errno = EMFILE; what = "stream"; goto fail; }
  s->pid = pid; s->tty = tty;
  if (tty) {
    s->fd_out[CH_OUT] = master;
    s->fd_in = fcntl(master, F_DUPFD_CLOEXEC, 0);
    set_nonblock(master);
  } else {
    close(in[0]); close(out[1]); close(err[1]);
    s->fd_in = in[1]; s->fd_out[CH_OUT] = out[0]; s->fd_out[CH_ERR] = err[0];
    set_nonblock(in[1]); set_nonblock(out[0]); set_nonblock(err[0]);
  }
  uint8_t sp[STARTED_LEN];
  wr32(sp + STARTED_OFF_PID, (uint32_t)pid);
  send_frame(T_STARTED, 0, id, sp, STARTED_LEN);
  free_req(&q);
  return;
fail:;
  int e = errno;
  send_error(id, e, "exec %s failed: %s: %s", q.argv[0], what, strerror(e));
  int fds[] = { master, in[0], in[1], out[0], out[1], err[0], err[1] };
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) if (fds[i] >= 0) close(fds[i]);
  free_req(&q);
}

void exec_reaped(pid_t pid, int wstatus) {
  for (int i = 0; i < g.nstreams; i++) {
    struct stream *s = g.streams[i];
    if (s->kind == K_EXEC && s->pid == pid && !s->exited) {
      s->exited = 1; s->wstatus = wstatus;
      exec_maybe_finish(s);
      return;
    }
  }
}

/* EXIT goes out only after both output channels reached EOF, so no output trails it. */
void exec_maybe_finish(struct stream *s) {
  if (!s->exited || s->fd_out[CH_OUT] >= 0 || s->fd_out[CH_ERR] >= 0) return;
  uint8_t p[EXIT_LEN];
  int code = -1, sig = 0;
  if (WIFEXITED(s->wstatus)) code = WEXITSTATUS(s->wstatus);
  else if (WIFSIGNALED(s->wstatus)) sig = WTERMSIG(s->wstatus);
  wr32(p + EXIT_OFF_CODE, (uint32_t)code); wr32(p + EXIT_OFF_SIGNAL, (uint32_t)sig);
  send_frame(T_EXIT, 0, s->id, p, EXIT_LEN);
  stream_free(s);
}

void exec_input_eof(struct stream *s) {
  if (s->fd_in < 0) return;
  if (s->tty) { /* a pty has no half-close: send the terminal's EOF character instead */
    struct termios t;
    char eof = tcgetattr(s->fd_in, &t) == 0 ? (char)t.c_cc[VEOF] : 4;
    ssize_t unused = write(s->fd_in, &eof, 1);
    (void)unused;
  }
  close(s->fd_in);
  s->fd_in = -1;
}

void exec_signal(struct stream *s, const uint8_t *p, uint32_t n) {
  if (n != SIGNAL_LEN || s->exited) return;
  uint32_t sig = rd32(p + SIGNAL_OFF_SIGNO);
  if (sig == 0 || sig > 64) return; /* the host validates names; ignore nonsense */
  kill(s->pid, (int)sig);
}

void exec_resize(struct stream *s, const uint8_t *p, uint32_t n) {
  if (n != RESIZE_LEN || !s->tty || s->fd_out[CH_OUT] < 0) return;
  struct winsize ws = { .ws_row = rd16(p + RESIZE_OFF_ROWS), .ws_col = rd16(p + RESIZE_OFF_COLS) };
  ioctl(s->fd_out[CH_OUT], TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH to the foreground group */
}

void exec_abort(struct stream *s) {
  if (!s->exited) { kill(-s->pid, SIGKILL); kill(s->pid, SIGKILL); }
}
