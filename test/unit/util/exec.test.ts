/** run(): the subprocess helper on every machine's launch path, on node's child_process alone. */
import { describe, expect, it } from 'vitest';
import { NoSpaceError, PrerequisiteError, SmolError } from '../../../src/errors/index.js';
import { run } from '../../../src/util/exec.js';

describe('run', () => {
  it('captures stdout and stderr as they were written, final newline included', async () => {
    const r = await run('sh', ['-c', 'printf "a\\nb\\n"; printf err >&2']);
    expect(r).toEqual({ stdout: 'a\nb\n', stderr: 'err', exitCode: 0 });
  });

  it('feeds input on stdin, and a program that ignores it is not an error', async () => {
    expect((await run('wc', ['-c'], { input: Buffer.alloc(300_000, 1) })).stdout.trim()).toBe('300000');
    expect((await run('true', [], { input: 'x'.repeat(1 << 20) })).exitCode).toBe(0);
  });

  it('extends the environment rather than replacing it, and runs in cwd', async () => {
    const r = await run('sh', ['-c', 'echo "$SMOL_T1 ${PATH:+path} $(pwd)"'], { env: { SMOL_T1: 'one' }, cwd: '/tmp' });
    expect(r.stdout).toBe('one path /tmp\n');
  });

  it('throws on a non-zero exit with the tail of stderr, unless told to allow it', async () => {
    await expect(run('sh', ['-c', 'echo first >&2; echo last >&2; exit 3'])).rejects.toThrow(/sh -c .* failed \(exit 3\): first\nlast/);
    expect((await run('sh', ['-c', 'exit 3'], { allowFailure: true })).exitCode).toBe(3);
  });

  it('a full disk in words becomes NoSpaceError', async () => {
    await expect(run('sh', ['-c', 'echo "write: No space left on device" >&2; exit 1'])).rejects.toBeInstanceOf(NoSpaceError);
  });

  it('a missing program is a PrerequisiteError naming it', async () => {
    const err = await run('smol-no-such-program', []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrerequisiteError);
    expect((err as Error).message).toBe('smol-no-such-program not found');
  });

  it('a program past its timeout is killed and named, even with allowFailure; one that ignores SIGTERM gets SIGKILL', async () => {
    const t = Date.now();
    const err = await run('sleep', ['30'], { timeoutMs: 200, allowFailure: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SmolError);
    expect((err as Error).message).toBe('sleep failed: timed out after 200 ms');
    expect(Date.now() - t).toBeLessThan(10_000);
    const stubborn = await run('sh', ['-c', 'trap "" TERM; sleep 30'], { timeoutMs: 100 }).catch((e: unknown) => e);
    expect((stubborn as Error).message).toBe('sh failed: timed out after 100 ms');
  }, 20_000);

  it('a program killed by a signal is an error, not exit code 0', async () => {
    await expect(run('sh', ['-c', 'kill -9 $$'], { allowFailure: true })).rejects.toThrow('sh failed: killed by SIGKILL');
  });
});
