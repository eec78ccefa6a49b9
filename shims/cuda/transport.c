/* Connection to the host daemon: one per guest process, shared by its threads under a lock.
 * Fire-and-forget frames are batched in a buffer and flushed by the next synchronous call. */
#include "shim.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WBUF_SIZE (256 * 1024)
#define DEFAULT_ENDPOINT "unix:/run/smol/cuda.sock"

int smol_driver_version, smol_device_count;
smol_device smol_devices[SMOL_MAX_DEVICES];

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1, g_state; /* 0 = not tried, 1 = up, -1 = failed */
static uint32_t g_seq;
static uint64_t g_conn_ctx;
static unsigned char g_wbuf[WBUF_SIZE];
static size_t g_wlen;
static uint64_t g_next_id;
static long g_spin_ns; /* how long call_locked polls for a reply before it sleeps in readv */

void smol_log(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt);
  fputs("smol-cuda: ", stderr); vfprintf(stderr, fmt, ap); fputc('\n', stderr);
  va_end(ap);
}

/* Issue #30: a program meeting an entry point the remoting lacks must fail at once with a message naming
 * it, so the first call of each says so on stderr (SMOL_CUDA_LOG=0 silences it). The stubs pass string
 * literals, so the pointer names the entry point; the table holds every export (537) with room to spare,
 * and a full table stays quiet rather than repeating a line on every call. */
CUresult smol_unsupported(const char *name) {
  enum { SLOTS = 2048 };
  static const char *seen[SLOTS]; static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  int first = 0;
  pthread_mutex_lock(&mu);
  for (size_t i = 0, h = ((uintptr_t)name >> 3) % SLOTS; i < SLOTS; i++, h = (h + 1) % SLOTS) {
    if (seen[h] == name) break;
    if (!seen[h]) { seen[h] = name; first = 1; break; }
  }
  pthread_mutex_unlock(&mu);
  const char *v = getenv("SMOL_CUDA_LOG");
  if (first && !(v && !strcmp(v, "0")))
    smol_log("%s is not supported by the remoting (CUDA_ERROR_NOT_SUPPORTED %d)", name, CUDA_ERROR_NOT_SUPPORTED);
  return CUDA_ERROR_NOT_SUPPORTED;
}

uint64_t smol_mint(uint64_t kind) { return (kind << 48) | __atomic_add_fetch(&g_next_id, 1, __ATOMIC_RELAXED); }

static int write_all(const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t r = write(g_fd, c, n);
    if (r < 0) { if (errno == EINTR) continue; return -1; }
    c += r; n -= (size_t)r;
  }
  return 0;
}
static int read_all(void *p, size_t n) {
  char *c = p;
  while (n) {
    ssize_t r = read(g_fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c += r; n -= (size_t)r;
  }
  return 0;
}

static int g_exiting;
static void broken(const char *why) {
  if (g_state == 1 && !g_exiting) smol_log("connection to the GPU daemon lost (%s)", why);
  if (g_fd >= 0) close(g_fd);
  g_fd = -1; g_state = -1;
}

static int flush_locked(void) {
  if (!g_wlen) return 0;
  int r = write_all(g_wbuf, g_wlen);
  g_wlen = 0;
  if (r) broken("write failed");
  return r;
}

static void header(unsigned char *h, uint32_t len, uint16_t op, uint16_t flags, uint32_t seq) {
  memcpy(h, &len, 4); memcpy(h + 4, &op, 2); memcpy(h + 6, &flags, 2); memcpy(h + 8, &seq, 4); memset(h + 12, 0, 4);
}

/* Queues one frame; big blobs bypass the batch buffer (after flushing it, to keep order). */
static int queue_locked(uint16_t op, uint16_t flags, const uint64_t *args, int nargs, const void *blob, size_t bloblen) {
  size_t alen = (size_t)nargs * 8, total = SMOL_HEADER_SIZE + alen + bloblen;
  if (alen + bloblen > SMOL_MAX_PAYLOAD) return -1;
  if (g_wlen + total > WBUF_SIZE && flush_locked()) return -1;
  if (total <= WBUF_SIZE) {
    header(g_wbuf + g_wlen, (uint32_t)(alen + bloblen), op, flags, ++g_seq);
    if (alen) memcpy(g_wbuf + g_wlen + SMOL_HEADER_SIZE, args, alen); /* args is NULL for ops without any */
    if (bloblen) memcpy(g_wbuf + g_wlen + SMOL_HEADER_SIZE + alen, blob, bloblen);
    g_wlen += total;
    return 0;
  }
  header(g_wbuf, (uint32_t)(alen + bloblen), op, flags, ++g_seq);
  if (alen) memcpy(g_wbuf + SMOL_HEADER_SIZE, args, alen);
  if (write_all(g_wbuf, SMOL_HEADER_SIZE + alen) || write_all(blob, bloblen)) { broken("write failed"); return -1; }
  return 0;
}

static int ctx_independent(uint16_t op) {
  return op == SMOL_OP_HELLO || op == SMOL_OP_DEVICE_PROPS || op == SMOL_OP_NVML_DEVICE_INFO || op == SMOL_OP_CTX_SET_CURRENT;
}

/* Each guest thread has its own current context; the host session has one thread, so switch it
 * (fire-and-forget) whenever the calling thread's context differs from the last one sent. */
static int sync_ctx_locked(uint16_t op, uint64_t ctx) {
  if (ctx_independent(op) || ctx == g_conn_ctx) return 0;
  g_conn_ctx = ctx;
  return queue_locked(SMOL_OP_CTX_SET_CURRENT, SMOL_FLAG_ASYNC, &ctx, 1, NULL, 0);
}

/* Sleeping in readv costs the reply a wake-up: a scheduler pass and, when the CPU went idle, an exit from
 * its idle state (in a VM, a trip through the hypervisor), which on an idle host is most of a null call's
 * round trip. Polling for a bounded time first keeps this thread on its CPU for a reply that comes quickly.
 * Polling a socket is a syscall that does not sleep; -1 means "nothing came in time, sleep". */
static ssize_t spin_recv(struct iovec *iov, int n) {
  struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    ssize_t got = recvmsg(g_fd, &m, MSG_DONTWAIT);
    if (got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return got;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= g_spin_ns) return -1;
  }
}

/* SMOL_CUDA_SPIN_US=0 turns polling off, N polls up to N µs (at most 10 ms). By default it is on (50 µs) only
 * with 4 or more CPUs online: with fewer, this thread's polling takes the CPU the daemon's side needs (on a
 * 2-vCPU VM, 50 µs of polling both ways made the C bench's null call 3x slower, not faster). */
static long spin_ns_setting(void) {
  const char *e = getenv("SMOL_CUDA_SPIN_US");
  if (e && *e) {
    char *end; unsigned long us = strtoul(e, &end, 10);
    if (!*end && e[0] != '-') return (long)(us > 10000 ? 10000 : us) * 1000;
    smol_log("ignoring SMOL_CUDA_SPIN_US=%s (not a number of microseconds)", e);
  }
  return sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? 50 * 1000 : 0;
}

static CUresult call_locked(uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen,
                            uint64_t *outs, int nouts, void *out, size_t outcap, size_t *outlen) {
  if (queue_locked(op, 0, args, nargs, blob, bloblen) || flush_locked()) return CUDA_ERROR_UNKNOWN;
  uint32_t seq = g_seq;
  unsigned char h[SMOL_HEADER_SIZE];
  uint64_t tmp[8];
  size_t olen = (size_t)nouts * 8;
  char *ob = outs ? (char *)outs : (char *)tmp;
  /* The daemon writes a reply in one piece: take its header and results with one readv, not two reads
   * (a syscall less per synchronous call). It never asks past the results, so a blob stays for below. */
  struct iovec iov[2] = { { h, sizeof h }, { ob, olen } };
  ssize_t got = g_spin_ns ? spin_recv(iov, olen ? 2 : 1) : -1;
  if (got < 0) do got = readv(g_fd, iov, olen ? 2 : 1); while (got < 0 && errno == EINTR);
  if (got <= 0 || ((size_t)got < sizeof h && read_all(h + got, sizeof h - (size_t)got))) {
    broken("daemon closed the connection"); return CUDA_ERROR_UNKNOWN;
  }
  uint32_t len, rseq; uint16_t rop; int32_t status;
  memcpy(&len, h, 4); memcpy(&rop, h + 4, 2); memcpy(&rseq, h + 8, 4); memcpy(&status, h + 12, 4);
  if (rseq != seq || rop != op || len < olen || len - olen > outcap || len > SMOL_MAX_PAYLOAD) {
    broken("malformed reply"); return CUDA_ERROR_UNKNOWN;
  }
  size_t have = (size_t)got > sizeof h ? (size_t)got - sizeof h : 0;
  if (olen > have && read_all(ob + have, olen - have)) { broken("short reply"); return CUDA_ERROR_UNKNOWN; }
  if (len > olen && read_all(out, len - olen)) { broken("short reply"); return CUDA_ERROR_UNKNOWN; }
  if (outlen) *outlen = len - olen;
  if (status && getenv("SMOL_CUDA_LOG")) smol_log("op %u returned %d", op, status);
  return status;
}

static int connect_endpoint(const char *ep) {
  int fd = -1;
  if (!strncmp(ep, "agent:", 6)) ep = DEFAULT_ENDPOINT; /* the guest agent forwards this socket to the host */
  if (!strncmp(ep, "unix:", 5)) {
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", ep + 5);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); fd = -1; }
  } else if (!strncmp(ep, "tcp:", 4)) {
    char host[256]; const char *colon = strrchr(ep + 4, ':');
    if (!colon || colon - (ep + 4) >= (long)sizeof host) return -1;
    memcpy(host, ep + 4, (size_t)(colon - (ep + 4))); host[colon - (ep + 4)] = 0;
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
    if (getaddrinfo(host, colon + 1, &hints, &res)) return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen)) { close(fd); fd = -1; }
    freeaddrinfo(res);
    int one = 1;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  } else if (!strncmp(ep, "vsock:", 6)) {
    struct { uint16_t family, reserved; uint32_t port, cid; unsigned char flags, zero[3]; } a = { 40, 0, 0, 2, 0, { 0 } };
    unsigned cid = 2, port = 0;
    if (sscanf(ep + 6, "%u:%u", &cid, &port) != 2) return -1;
    a.cid = cid; a.port = port;
    fd = socket(40, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); fd = -1; }
  }
  return fd;
}

static void after_fork_child(void) { g_fd = -1; g_state = 0; g_wlen = 0; g_conn_ctx = 0; pthread_mutex_init(&g_mu, NULL); }
static void at_exit(void) { g_exiting = 1; pthread_mutex_lock(&g_mu); if (g_state == 1) flush_locked(); pthread_mutex_unlock(&g_mu); }

static CUresult connect_locked(void) {
  if (g_state == 1) return CUDA_SUCCESS;
  if (g_state == -1) return CUDA_ERROR_NO_DEVICE;
  g_state = -1;
  const char *ep = getenv("SMOL_CUDA_ENDPOINT");
  if (!ep || !*ep) ep = DEFAULT_ENDPOINT;
  g_fd = connect_endpoint(ep);
  if (g_fd < 0) { smol_log("cannot connect to the GPU daemon at %s: %s", ep, strerror(errno)); return CUDA_ERROR_NO_DEVICE; }
  g_state = 1;
  g_spin_ns = spin_ns_setting();
  pthread_atfork(NULL, NULL, after_fork_child);
  atexit(at_exit);
  uint64_t args[4] = { SMOL_PROTO_MAGIC, SMOL_PROTO_HASH, (uint64_t)getpid(), 0 }, outs[5];
  CUresult r = call_locked(SMOL_OP_HELLO, args, 4, NULL, 0, outs, 5, NULL, 0, NULL);
  if (r == 46) { /* CUDA_ERROR_DEVICE_UNAVAILABLE: the daemon serves its limit of sessions */
    smol_log("GPU daemon at %s refused the session: it already serves its limit of CUDA processes (SMOL_GPU_MAX_SESSIONS on the host)", ep);
    broken("handshake"); return CUDA_ERROR_NO_DEVICE;
  }
  if (r) {
    smol_log("GPU daemon at %s refused the handshake (%d): shim and daemon are from different protocol versions", ep, r);
    broken("handshake"); return CUDA_ERROR_NO_DEVICE;
  }
  smol_driver_version = (int)outs[0];
  smol_device_count = outs[3] > SMOL_MAX_DEVICES ? SMOL_MAX_DEVICES : (int)outs[3];
  for (int d = 0; d < smol_device_count; d++) {
    unsigned char buf[280 + SMOL_ATTR_COUNT * 4]; size_t n = 0;
    uint64_t dev = (uint64_t)d;
    r = call_locked(SMOL_OP_DEVICE_PROPS, &dev, 1, NULL, 0, NULL, 0, buf, sizeof buf, &n);
    if (r || n != sizeof buf) { smol_log("device %d properties unavailable (%d)", d, r); smol_device_count = d; break; }
    memcpy(smol_devices[d].name, buf, 256); smol_devices[d].name[255] = 0;
    memcpy(smol_devices[d].uuid, buf + 256, 16);
    memcpy(&smol_devices[d].total_mem, buf + 272, 8);
    memcpy(smol_devices[d].attrs, buf + 280, SMOL_ATTR_COUNT * 4);
  }
  if (getenv("SMOL_CUDA_LOG")) smol_log("connected to %s: driver %d, %d device(s), session %llu", ep, smol_driver_version, smol_device_count, (unsigned long long)outs[4]);
  return CUDA_SUCCESS;
}

CUresult smol_connect(void) {
  if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == 1) return CUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  CUresult r = connect_locked();
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* A kernel fault is fatal to the whole process on the real driver: from then on its work calls (copies,
 * memsets, launches, frees, records), in every context, return the fault (H200, 580.159: a cuMemFree in
 * another context returned 700). Fire-and-forget calls cannot hear that from the daemon in time, so once
 * any reply has carried such an error the shim answers them with it itself. */
static CUresult g_sticky;
static int sticky_code(CUresult r) { return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719); }
static int is_work(uint16_t op) {
  switch (op) {
  case SMOL_OP_MEM_FREE: case SMOL_OP_MEM_FREE_ASYNC: case SMOL_OP_MEMCPY_HTO_D: case SMOL_OP_MEMCPY_DTO_D:
  case SMOL_OP_MEMSET: case SMOL_OP_LAUNCH_KERNEL: case SMOL_OP_EVENT_RECORD: case SMOL_OP_STREAM_WAIT_EVENT:
  case SMOL_OP_STREAM_CREATE: case SMOL_OP_EVENT_CREATE:
  /* the framework areas' work: after a fault the driver refuses it from the call itself, as it does the above */
  case SMOL_OP_LAUNCH_KERNEL_EX: case SMOL_OP_GRAPH_LAUNCH: case SMOL_OP_GRAPH_UPLOAD: case SMOL_OP_MEMCPY2D_HTO_D:
  case SMOL_OP_MEMCPY3D_DTO_D: case SMOL_OP_MEMSET2D: case SMOL_OP_STREAM_MEM_OP:
    return 1;
  default:
    return 0;
  }
}

CUresult smol_call(uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen,
                   uint64_t *outs, int nouts, void *out, size_t outcap, size_t *outlen) {
  uint64_t ctx = smol_current_id();
  pthread_mutex_lock(&g_mu);
  CUresult r = connect_locked();
  if (!r) r = sync_ctx_locked(op, ctx) ? CUDA_ERROR_UNKNOWN : call_locked(op, args, nargs, blob, bloblen, outs, nouts, out, outcap, outlen);
  if (sticky_code(r) && !g_sticky) __atomic_store_n(&g_sticky, r, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mu);
  return r;
}

CUresult smol_fire(uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen) {
  return smol_fire_ctx(smol_current_id(), op, args, nargs, blob, bloblen);
}
/* For callers that already hold the calling thread's context (launches: one TLS read fewer). */
CUresult smol_fire_ctx(uint64_t ctx, uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen) {
  CUresult sticky = __atomic_load_n(&g_sticky, __ATOMIC_ACQUIRE);
  if (sticky && is_work(op)) return sticky;
  pthread_mutex_lock(&g_mu);
  CUresult r = connect_locked();
  if (!r && (sync_ctx_locked(op, ctx) || queue_locked(op, SMOL_FLAG_ASYNC, args, nargs, blob, bloblen))) r = CUDA_ERROR_UNKNOWN;
  pthread_mutex_unlock(&g_mu);
  return r;
}
