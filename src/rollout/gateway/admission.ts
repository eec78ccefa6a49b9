/**
 * Admission control: a cap on outstanding requests per rollout and overall. Over a cap the answer is an
 * explicit 429 with Retry-After (seed 000: a clear overload answer beats queuing into a retry storm).
 */
export interface AdmissionLimits { maxOutstanding: number; maxPerRollout: number }

export class Admission {
  outstanding = 0;
  rejected = 0;
  private readonly perRollout = new Map<string, number>();
  /** Recent request latency, for a Retry-After that means something. */
  private ewmaMs = 100;

  constructor(readonly limits: AdmissionLimits) {}

  /** Returns null when admitted, else the seconds the client should wait. */
  tryAdmit(rolloutId: string): number | null {
    const mine = this.perRollout.get(rolloutId) ?? 0;
    if (this.outstanding >= this.limits.maxOutstanding || mine >= this.limits.maxPerRollout) {
      this.rejected++;
      // time for the queue ahead to drain at the observed latency, at least a second (the header's unit)
      return Math.max(1, Math.ceil((this.ewmaMs * Math.max(1, this.outstanding / 64)) / 1000));
    }
    this.outstanding++;
    this.perRollout.set(rolloutId, mine + 1);
    return null;
  }

  release(rolloutId: string, latencyMs: number): void {
    this.outstanding--;
    const mine = (this.perRollout.get(rolloutId) ?? 1) - 1;
    if (mine <= 0) this.perRollout.delete(rolloutId);
    else this.perRollout.set(rolloutId, mine);
    this.ewmaMs = this.ewmaMs * 0.9 + latencyMs * 0.1;
  }

  snapshot(): { outstanding: number; rejected: number; perRollout: Record<string, number>; limits: AdmissionLimits } {
    return { outstanding: this.outstanding, rejected: this.rejected, perRollout: Object.fromEntries(this.perRollout), limits: this.limits };
  }
}
