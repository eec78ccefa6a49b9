/**
 * Prometheus metrics of `smol serve` (GET /metrics). Machines by state and memory are read from the machine
 * database and /proc when scraped, so machines the CLI started count too.
 */
import client from 'prom-client';
import { memoryUsage, type MachineService } from '../vm/api/machines.js';

/** Boots under TCG take seconds; an exec round trip is milliseconds. */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class ApiMetrics {
  readonly registry = new client.Registry();
  readonly requests = new client.Counter({ name: 'smol_api_requests_total', help: 'API requests by route and status', labelNames: ['route', 'status'] as const, registers: [this.registry] });
  readonly boots = new client.Counter({ name: 'smol_boots_total', help: 'Machines started through the API', registers: [this.registry] });
  readonly bootSeconds = new client.Histogram({ name: 'smol_boot_seconds', help: 'Time from start request to a ready guest', buckets: SECONDS, registers: [this.registry] });
  readonly restores = new client.Counter({ name: 'smol_restores_total', help: 'Machines resumed from saved memory through the API', registers: [this.registry] });
  readonly forks = new client.Counter({ name: 'smol_forks_total', help: 'Fork clones made through the API', registers: [this.registry] });
  readonly forkSeconds = new client.Histogram({ name: 'smol_fork_seconds', help: 'Time to make a fork (all its clones)', buckets: SECONDS, registers: [this.registry] });
  readonly execSeconds = new client.Histogram({ name: 'smol_exec_seconds', help: 'Time from exec request to the command exiting', buckets: SECONDS, registers: [this.registry] });

  constructor(svc: MachineService) {
    new client.Gauge({
      name: 'smol_machines', help: 'Machines by state', labelNames: ['state'] as const, registers: [this.registry],
      async collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const r of await svc.list()) counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
        for (const [state, n] of counts) this.set({ state }, n);
      },
    });
    new client.Gauge({
      name: 'smol_machine_memory_pss_bytes', help: 'Proportional set size of each running machine\'s QEMU', labelNames: ['machine'] as const, registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of await svc.list()) {
          const m = r.state === 'running' ? memoryUsage(r.pid) : null;
          if (m) this.set({ machine: r.name }, Math.round(m.pssMiB * 1024 * 1024));
        }
      },
    });
  }

  /** Times `fn` into `h`, whether it succeeds or not. */
  async time<T>(h: client.Histogram, fn: () => Promise<T>): Promise<T> {
    const end = h.startTimer();
    try {
      return await fn();
    } finally {
      end();
    }
  }
}
