/**
 * Adaptive concurrency: raise the number of parallel items only while completed items/s rises (seed 000:
 * "scale CPU concurrency only while it increases completed trajectories"). Windows where the queue ran dry
 * say nothing about capacity and are ignored.
 */
export interface ConcurrencyStep { from: number; to: number; rate: number; best: number; reason: string }

export class AdaptiveConcurrency {
  current: number;
  private completed = 0;
  private starved = false;
  private best = 0;
  private bestLevel = 1;
  private holdWindows = 0;

  constructor(readonly max: number, readonly adaptive = true, private readonly minGain = 0.05, private readonly holdAfterLoss = 10) {
    this.current = adaptive ? 1 : max;
  }

  completedOne(): void { this.completed++; }
  /** The queue had nothing for a free slot during this window. */
  markStarved(): void { this.starved = true; }

  /** Ends a measurement window; returns the step taken (or the measurement when nothing changed). */
  endWindow(windowMs: number): ConcurrencyStep {
    const rate = this.completed / (windowMs / 1000);
    const starved = this.starved;
    this.completed = 0;
    this.starved = false;
    const from = this.current;
    const step = (to: number, reason: string): ConcurrencyStep => {
      this.current = to;
      return { from, to, rate, best: this.best, reason };
    };
    if (!this.adaptive) return step(from, 'fixed');
    if (starved) return step(from, 'queue ran dry; not judged');
    if (this.holdWindows > 0) {
      this.holdWindows--;
      return step(from, 'holding');
    }
    if (rate > this.best * (1 + this.minGain)) {
      this.best = rate;
      this.bestLevel = from;
      if (from >= this.max) return step(from, 'at max');
      return step(Math.min(this.max, from + Math.max(1, Math.floor(from / 2))), 'rate rose');
    }
    // no gain from the last increase: go back to the best level and hold before probing again
    this.holdWindows = this.holdAfterLoss;
    this.best = Math.max(rate, this.best * 0.9); // let the baseline drift so load changes are re-probed
    return step(this.bestLevel, 'rate did not rise');
  }
}
