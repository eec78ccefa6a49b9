import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency } from '../../../src/rollout/concurrency.js';

function window(c: AdaptiveConcurrency, completed: number, starved = false) {
  for (let i = 0; i < completed; i++) c.completedOne();
  if (starved) c.markStarved();
  return c.endWindow(1000);
}

describe('adaptive concurrency', () => {
  it('scales up only while completed items/s rises, then returns to the best level and holds', () => {
    const c = new AdaptiveConcurrency(16, true);
    expect(c.current).toBe(1);
    expect(window(c, 10)).toMatchObject({ from: 1, to: 2, rate: 10, reason: 'rate rose' });
    expect(window(c, 19)).toMatchObject({ from: 2, to: 3 });
    expect(window(c, 27)).toMatchObject({ from: 3, to: 4 });
    // saturated: more workers did not help
    expect(window(c, 27)).toMatchObject({ from: 4, to: 3, reason: 'rate did not rise' });
    expect(window(c, 40)).toMatchObject({ from: 3, to: 3, reason: 'holding' });
  });

  it('ignores windows where the queue ran dry', () => {
    const c = new AdaptiveConcurrency(8, true);
    window(c, 10);
    expect(window(c, 1, true)).toMatchObject({ from: 2, to: 2, reason: 'queue ran dry; not judged' });
  });

  it('never exceeds the maximum, and a fixed setting never moves', () => {
    const c = new AdaptiveConcurrency(2, true);
    window(c, 1);
    window(c, 5);
    expect(window(c, 50).to).toBe(2);
    const f = new AdaptiveConcurrency(6, false);
    expect(window(f, 1)).toMatchObject({ from: 6, to: 6, reason: 'fixed' });
  });
});
