/* libFuzzer target: the guest CUDA shim's reading of the daemon's replies (shims/cuda): the reply
 * header checks in transport.c and what the API calls do with the results and blobs they get back
 * (device count and properties, allocations, copies back to the guest, kernel parameter layouts that a
 * launch then packs arguments by). transport.c is compiled into this file so its connection state can
 * be reset per input; the rest of the shim is linked as it is.
 *
 * A thread plays the daemon on a unix socket: for each synchronous request it answers with the next
 * reply the input describes, then hangs up when the input runs out. Reply record: u8 ctl, u16 length,
 * i32 status, then the payload; ctl bit 0 takes a u32 seq from the input instead of echoing the
 * request's, bit 1 a u16 op, bit 7 a u32 length instead of the u16. */
#include <signal.h>
#include <sys/stat.h>
#include "../../../shims/cuda/transport.c"

extern int smol_inited;
EXPORT CUresult cuInit(unsigned flags);
EXPORT CUresult cuDeviceGetCount(int *n);
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d);
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d);
EXPORT CUresult cuCtxCreate_v2(smol_ctx **out, unsigned flags, CUdevice d);
EXPORT CUresult cuCtxDestroy_v2(smol_ctx *c);
EXPORT CUresult cuCtxSynchronize(void);
EXPORT CUresult cuCtxGetLimit(size_t *v, int limit);
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
EXPORT CUresult cuMemFree_v2(CUdeviceptr p);
EXPORT CUresult cuMemGetInfo_v2(size_t *fr, size_t *total);
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n);
EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n);
EXPORT CUresult cuModuleLoadData(smol_module **m, const void *image);
EXPORT CUresult cuModuleUnload(smol_module *m);
EXPORT CUresult cuModuleGetFunction(smol_func **f, smol_module *m, const char *name);
EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *d, size_t *n, smol_module *m, const char *name);
EXPORT CUresult cuFuncGetAttribute(int *v, int attr, smol_func *f);
EXPORT CUresult cuLaunchKernel(smol_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned smem, void *s, void **params, void **extra);

static char sock_path[108];
static int listen_fd = -1;
struct feed { const uint8_t *p; size_t n; };

static int take(struct feed *f, void *out, size_t k) {
  if (f->n < k) return -1;
  memcpy(out, f->p, k); f->p += k; f->n -= k;
  return 0;
}
static int read_full(int fd, void *p, size_t n) {
  for (char *c = p; n;) { ssize_t r = read(fd, c, n); if (r <= 0) return -1; c += r; n -= (size_t)r; }
  return 0;
}

static void *daemon_thread(void *arg) {
  struct feed *f = arg;
  int c = accept(listen_fd, NULL, NULL);
  if (c < 0) return NULL;
  static unsigned char req[SMOL_MAX_PAYLOAD];
  for (;;) {
    unsigned char h[SMOL_HEADER_SIZE];
    if (read_full(c, h, sizeof h)) break;
    uint32_t len, seq; uint16_t op, flags;
    memcpy(&len, h, 4); memcpy(&op, h + 4, 2); memcpy(&flags, h + 6, 2); memcpy(&seq, h + 8, 4);
    if (len > sizeof req || read_full(c, req, len)) break;
    if (flags & SMOL_FLAG_ASYNC) continue;
#ifdef FUZZ_TRACE
    fprintf(stderr, "sync op %u len %u\n", op, len);
#endif
    uint8_t ctl; uint16_t len16; int32_t status; uint32_t rlen;
    if (take(f, &ctl, 1) || take(f, &len16, 2) || take(f, &status, 4)) break;
    rlen = len16;
    if ((ctl & 0x80) && take(f, &rlen, 4)) break;
    if ((ctl & 1) && take(f, &seq, 4)) break;
    if ((ctl & 2) && take(f, &op, 2)) break;
    unsigned char out[SMOL_HEADER_SIZE];
    flags = SMOL_FLAG_REPLY;
    memcpy(out, &rlen, 4); memcpy(out + 4, &op, 2); memcpy(out + 6, &flags, 2); memcpy(out + 8, &seq, 4); memcpy(out + 12, &status, 4);
    size_t body = rlen < f->n ? rlen : f->n;
    if (send(c, out, sizeof out, MSG_NOSIGNAL) < 0 || (body && send(c, f->p, body, MSG_NOSIGNAL) < 0)) break;
    f->p += body; f->n -= body;
    if (body < rlen) break; /* the input ran out mid-reply: hang up, as a daemon that died would */
  }
  close(c);
  return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  signal(SIGPIPE, SIG_IGN);
  snprintf(sock_path, sizeof sock_path, "/tmp/smol-fuzz-cuda-%d.sock", (int)getpid());
  unlink(sock_path);
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) || listen(listen_fd, 4)) { perror("fuzz: daemon socket"); abort(); }
  static char ep[128];
  snprintf(ep, sizeof ep, "unix:%s", sock_path);
  setenv("SMOL_CUDA_ENDPOINT", ep, 1);
  return 0;
}

/* A guest program's calls, each allowed to fail: the point is what the shim does with the answers. */
static void guest_program(void) {
  if (cuInit(0)) return;
  int n = 0; char name[256]; size_t total = 0, fr = 0, limit = 0;
  cuDeviceGetCount(&n);
  cuDeviceGetName(name, sizeof name, 0);
  cuDeviceTotalMem_v2(&total, 0);
  smol_ctx *ctx = NULL;
  if (cuCtxCreate_v2(&ctx, 0, 0)) return;
  cuCtxGetLimit(&limit, 0);
  CUdeviceptr p = 0;
  static unsigned char host[8192];
  if (!cuMemAlloc_v2(&p, sizeof host)) {
    cuMemcpyHtoD_v2(p, host, sizeof host);
    cuMemcpyDtoH_v2(host, p, sizeof host);
  }
  cuMemGetInfo_v2(&fr, &total);
  smol_module *m = NULL;
  if (!cuModuleLoadData(&m, ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a, .param .u32 b) { ret; }\n")) {
    smol_func *f = NULL;
    CUdeviceptr g = 0; size_t gn = 0;
    cuModuleGetGlobal_v2(&g, &gn, m, "glob");
    if (!cuModuleGetFunction(&f, m, "k")) {
      int v = 0;
      cuFuncGetAttribute(&v, 0, f);
      /* Each argument slot is as large as any layout the launch accepts, so only the shim's own packing can overflow. */
      static unsigned char args[SMOL_MAX_PARAMS][4096];
      static void *params[SMOL_MAX_PARAMS];
      for (int i = 0; i < SMOL_MAX_PARAMS; i++) params[i] = args[i];
      cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
      cuCtxSynchronize();
    }
    cuModuleUnload(m);
  }
  if (p) cuMemFree_v2(p);
  cuCtxDestroy_v2(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct feed f = { data, size };
  pthread_t t;
  g_fd = -1; g_state = 0; g_seq = 0; g_wlen = 0; g_conn_ctx = 0; g_sticky = 0; g_exiting = 1;
  smol_inited = 0; smol_device_count = 0;
  if (pthread_create(&t, NULL, daemon_thread, &f)) abort();
  guest_program();
  pthread_mutex_lock(&g_mu);
  if (g_fd >= 0) close(g_fd);
  g_fd = -1; g_state = 0;
  pthread_mutex_unlock(&g_mu);
  pthread_join(t, NULL);
  return 0;
}
