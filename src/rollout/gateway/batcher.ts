/**
 * Groups compatible requests (same model, version and decoding parameters) and flushes a group when it
 * reaches the batch size or its oldest request has waited the window.
 */
export interface BatchOptions { maxBatch: number; windowMs: number }

export class Batcher<T> {
  private readonly groups = new Map<string, { items: T[]; timer: NodeJS.Timeout }>();
  constructor(private readonly opts: BatchOptions, private readonly flush: (key: string, items: T[]) => void) {}

  add(key: string, item: T): void {
    let g = this.groups.get(key);
    if (!g) {
      g = { items: [], timer: setTimeout(() => this.flushKey(key), this.opts.windowMs) };
      this.groups.set(key, g);
    }
    g.items.push(item);
    if (g.items.length >= this.opts.maxBatch) this.flushKey(key);
  }

  private flushKey(key: string): void {
    const g = this.groups.get(key);
    if (!g) return;
    clearTimeout(g.timer);
    this.groups.delete(key);
    this.flush(key, g.items);
  }

  flushAll(): void {
    for (const key of [...this.groups.keys()]) this.flushKey(key);
  }

  get pending(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.items.length;
    return n;
  }
}
