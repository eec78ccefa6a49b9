/**
 * Stream capture and graphs beyond the conformance program (conf_graphs, run by conformance.test.ts):
 * the daemon lets a session name only its own graphs and execs, and the shim answers the capture
 * queries frameworks ask around every allocation without a round trip, as docs/cuda.md says.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { Raw, build, buildNative, nvcc, progs, results, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

const id = (kind: number, n: number) => kind * 2 ** 48 + n;
const fire = (c: Raw, op: number, args: number[]) => c.send(encodeFrame(op, args, { flags: PROTOCOL.flags.async }));

describe('graphs through the daemon', () => {
  it('a session instantiates, launches, updates and destroys only its own graphs and execs', async () => {
    const owner = new Raw(d.endpoint), thief = new Raw(d.endpoint);
    await owner.withMemory(4096); await thief.withMemory(4096);
    const stream = id(PROTOCOL.kinds.stream, 900), graph = id(PROTOCOL.kinds.graph, 901), exec = id(PROTOCOL.kinds.graphExec, 902);
    fire(owner, OP.StreamCreate, [stream, 1, 0]);
    expect((await owner.call(OP.StreamBeginCapture, [stream, 0, graph]))?.status).toBe(0);
    expect((await owner.call(OP.StreamBeginCapture, [stream, 0, graph]))?.status).not.toBe(0);
    expect((await owner.call(OP.StreamEndCapture, [stream, 0]))?.status).toBe(0);
    expect((await owner.call(OP.StreamEndCapture, [stream, 0]))?.status).toBe(401); // not capturing any more
    expect((await owner.call(OP.GraphInstantiate, [exec, graph, 0]))?.status).toBe(0);
    expect((await owner.call(OP.GraphInstantiate, [exec, graph, 0]))?.status).toBe(400); // the id is taken

    // The thief knows the ids (they are small numbers) but they are not its own.
    expect((await thief.call(OP.GraphInstantiate, [id(PROTOCOL.kinds.graphExec, 903), graph, 0]))?.status).toBe(400);
    expect((await thief.call(OP.GraphExecUpdate, [exec, graph]))?.status).toBe(400);
    fire(thief, OP.GraphLaunch, [exec, 0]);
    expect((await thief.call(OP.CtxSynchronize, []))?.status).toBe(400); // the launch's pending error
    fire(thief, OP.GraphExecDestroy, [exec]);
    fire(thief, OP.GraphDestroy, [graph]);
    expect((await thief.call(OP.CtxSynchronize, []))?.status).toBe(400);

    // ...and the owner's graph and exec are untouched by all that.
    fire(owner, OP.GraphLaunch, [exec, stream]);
    expect((await owner.call(OP.StreamSynchronize, [stream]))?.status).toBe(0);
    fire(owner, OP.GraphExecDestroy, [exec]);
    fire(owner, OP.GraphDestroy, [graph]);
    expect((await owner.call(OP.CtxSynchronize, []))?.status).toBe(0);
    fire(owner, OP.GraphLaunch, [exec, stream]);
    expect((await owner.call(OP.CtxSynchronize, []))?.status).toBe(400); // destroyed
    owner.sock.destroy(); thief.sock.destroy();
  });

  it.skipIf(!nvcc)(`cudart's graphs (rt_graphs, shared cudart): thread-local capture with a relaxed cudaMalloc, 10 replays, a refused pageable copy${nvcc ? '' : ' [skipped: nvcc not installed]'}`, async () => {
    const r = await runProgram(path.join(progs, 'rt_graphs'), [], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(results(r.stdout)).toEqual({
      idle_not_capturing: 'PASS', capturing_with_id: 'PASS', replay_10_times: 'PASS', pageable_copy_refused_in_capture: 'PASS',
    });
  });

  it('cuStreamIsCapturing and cuStreamGetCaptureInfo cost no round trip unless work went to the capture', async () => {
    const dir = fs.mkdtempSync(path.join(d.dir, 'q-'));
    const src = path.join(dir, 'q.c'), bin = path.join(dir, 'q');
    // Phases separated by stdin lines, so the test reads the session's call count between them.
    fs.writeFileSync(src, `#include <stdio.h>
#include <stdint.h>
typedef int CUresult; typedef void *H;
CUresult cuInit(unsigned); CUresult cuCtxCreate_v2(H *, unsigned, int); CUresult cuStreamCreate(H *, unsigned);
CUresult cuStreamIsCapturing(H, int *); CUresult cuStreamGetCaptureInfo_v3(H, int *, uint64_t *, H *, const void **, const void **, size_t *);
CUresult cuStreamBeginCapture_v2(H, int); CUresult cuStreamEndCapture(H, H *); CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemsetD8Async(uint64_t, unsigned char, size_t, H);
static int queries(H s) { int st = -1, bad = 0; uint64_t id; H g;
  for (int i = 0; i < 1000; i++) { bad += cuStreamIsCapturing(s, &st) != 0; bad += cuStreamGetCaptureInfo_v3(s, &st, &id, &g, 0, 0, 0) != 0; }
  return bad ? -1 : st; }
int main(void) { H c, s, g; uint64_t p; char line[8];
  if (cuInit(0) || cuCtxCreate_v2(&c, 0, 0) || cuStreamCreate(&s, 1) || cuMemAlloc_v2(&p, 64)) return 2;
  printf("idle %d\\n", queries(s)); fflush(stdout); fgets(line, sizeof line, stdin);
  if (cuStreamBeginCapture_v2(s, 2)) return 3;
  printf("capturing %d\\n", queries(s)); fflush(stdout); fgets(line, sizeof line, stdin);
  if (cuMemsetD8Async(p, 1, 64, s)) return 4;
  printf("after_work %d\\n", queries(s)); fflush(stdout); fgets(line, sizeof line, stdin);
  return cuStreamEndCapture(s, &g) ? 5 : 0; }
`);
    execFileSync('cc', ['-O2', '-o', bin, src, path.join(build, 'libcuda.so.1')]);
    const p = spawn(bin, [], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b) => { out += b; });
    const calls = async () => (await d.status()).sessions.find((x) => x.calls > 0)?.calls ?? -1;
    const phase = async (word: string) => {
      await waitFor(async () => (out.includes(`${word} `) ? true : undefined), 20_000);
      await new Promise((r) => setTimeout(r, 300)); // the counters are published every few ms
      return calls();
    };
    const afterIdle = await phase('idle');
    p.stdin.write('\n');
    const afterCapturing = await phase('capturing');
    p.stdin.write('\n');
    const afterWork = await phase('after_work');
    p.stdin.write('\n');
    const code = await new Promise((r) => p.on('exit', r));
    expect(code).toBe(0);
    expect(out).toContain('idle 0\n');       // CU_STREAM_CAPTURE_STATUS_NONE
    expect(out).toContain('capturing 1\n');  // ACTIVE
    expect(out).toContain('after_work 1\n');
    // 2000 queries in each phase: none reached the host while idle or while the capture had no new work
    // (the begin is one call), and after the memset exactly one did (the memset is one more frame).
    expect(afterIdle).toBeGreaterThan(0);
    expect(afterCapturing - afterIdle).toBe(1);
    expect(afterWork - afterCapturing).toBe(2);
  });
});
