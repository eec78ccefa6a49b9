/**
 * What a fuzz target is, and the properties every one of them shares: a parser of untrusted bytes
 * either returns or throws one of its documented error classes, finishes within a time bound, and does
 * not make the process hold memory in proportion to a length field instead of the bytes it was given.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type fc from 'fast-check';

export const FUZZ_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface FuzzTarget {
  name: string;
  /** Inputs: structured generators plus mutations of the committed corpus. */
  arbitrary(seeds: readonly Buffer[]): fc.Arbitrary<Buffer>;
  /** Runs one input; throws FuzzFailure (or anything unexpected) when a property breaks. */
  run(input: Buffer): Promise<void>;
  /** Seeds that are built rather than committed (in addition to corpus/<name>/). */
  extraSeeds?(): Promise<Buffer[]>;
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
  /** Per-input wall-clock bound. */
  timeoutMs?: number;
  /**
   * Failures found and reported but not fixed yet (in code this suite does not own): the unit replay
   * tolerates them and lists each as a skipped test; `npm run fuzz` still reports them as crashes.
   */
  known?: readonly { match: RegExp; why: string }[];
}

/** Runs one input, letting the target's known (reported, unfixed) failures pass. */
export async function runTolerant(t: FuzzTarget, input: Buffer): Promise<void> {
  try {
    await t.run(input);
  } catch (err) {
    if (err instanceof FuzzFailure && t.known?.some((k) => k.match.test(err.message))) return;
    throw err;
  }
}

/** A property broke: the message says which and why. */
export class FuzzFailure extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FuzzFailure';
  }
}

type ErrorClass = abstract new (...args: never[]) => Error;

/** Rethrows `err` as a FuzzFailure unless it is an instance of one of `allowed`. */
export function expectOnly(err: unknown, allowed: readonly ErrorClass[], what: string): void {
  if (err instanceof FuzzFailure) throw err;
  if (allowed.some((c) => err instanceof c)) return;
  const desc = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  throw new FuzzFailure(`${what} threw an undocumented error: ${desc}`, { cause: err });
}

/** Runs fn, failing the input if it outlives `ms` (a hang) or raises resident memory past `maxGrowth` bytes. */
export async function bounded<T>(what: string, ms: number, fn: () => Promise<T>, maxGrowth = 256 << 20): Promise<T> {
  const before = process.memoryUsage.rss();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FuzzFailure(`${what} did not finish within ${ms} ms`)), ms);
  });
  let result: T;
  try {
    result = await Promise.race([fn(), hang]);
  } finally {
    clearTimeout(timer);
  }
  const grew = process.memoryUsage.rss() - before;
  if (grew > maxGrowth) throw new FuzzFailure(`${what} grew resident memory by ${Math.round(grew / 2 ** 20)} MiB`);
  return result;
}

/** The committed seeds of a target (test/fuzz/corpus/<name>/*). */
export function corpus(name: string): Buffer[] {
  const dir = path.join(FUZZ_DIR, 'corpus', name);
  try {
    return readdirSync(dir).sort().map((f) => readFileSync(path.join(dir, f)));
  } catch {
    return [];
  }
}

/** Crashing inputs found earlier that are fixed now (test/fuzz/crashes/<name>/fixed-*): replayed as regressions. */
export function fixedCrashes(name: string): { file: string; bytes: Buffer }[] {
  const dir = path.join(FUZZ_DIR, 'crashes', name);
  try {
    return readdirSync(dir).filter((f) => f.startsWith('fixed-')).sort().map((f) => ({ file: f, bytes: readFileSync(path.join(dir, f)) }));
  } catch {
    return [];
  }
}
