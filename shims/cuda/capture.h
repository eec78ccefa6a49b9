/* Stream capture (graphs.c): every call that puts work on a stream, waits for one or records or waits
 * for an event asks smol_capture() first. While no stream captures, that is one load. */
#ifndef SMOL_CAPTURE_H
#define SMOL_CAPTURE_H
#include "shim.h"

enum { SMOL_CW_DEVICE, SMOL_CW_HOST, SMOL_CW_HOSTFN, SMOL_CW_SYNC, SMOL_CW_RECORD, SMOL_CW_WAIT };
extern int smol_captures;
CUresult smol_capture_hook(void *s, int what, void *ev);
/* cuStreamDestroy: the stream leaves any capture it is in. */
void smol_capture_forget(void *s);
/* cuMemAlloc and the like: refused by the capture mode rules (cuThreadExchangeStreamCaptureMode). */
CUresult smol_capture_unsafe(void);
static inline CUresult smol_capture(void *s, int what, void *ev) {
  return __atomic_load_n(&smol_captures, __ATOMIC_RELAXED) ? smol_capture_hook(s, what, ev) : CUDA_SUCCESS;
}
#endif
