/**
 * Lifecycle changes as server-sent `machine` events. The machine database is polled, not hooked, so changes
 * the CLI or another process makes show as well as the API's own. Only changes are sent: a client that wants
 * the present lists the machines once, then follows this.
 */
import { openSse } from '../sse.js';
import { defineRoute, type Route } from '../router.js';
import type { MachineService } from '../../vm/api/machines.js';

const POLL_MS = 500;

type Seen = Map<string, { name: string; state: string }>;

const snapshot = (svc: MachineService): Seen => new Map(svc.store.list().map((r) => [r.id, { name: r.name, state: r.state }]));

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/events', operationId: 'events', tags: ['machines'],
    summary: 'Machine lifecycle changes as SSE `machine` events (MachineEvent), a `: ping` comment every 15 s',
    responses: { 200: { description: 'text/event-stream of `machine` events (MachineEvent)', contentType: 'text/event-stream' } },
    handle: async ({ ctx, res }) => {
      let seen = snapshot(ctx.svc);
      let stop = () => undefined as void;
      const sse = openSse(res, () => stop());
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          let now: Seen;
          try {
            now = snapshot(ctx.svc);
          } catch {
            return; // the database busy for a moment: the next poll sees what changed
          }
          const at = new Date().toISOString();
          for (const [id, m] of now) {
            const before = seen.get(id);
            if (before?.state !== m.state) sse.send('machine', { name: m.name, id, state: m.state, previous: before?.state ?? null, at });
          }
          for (const [id, m] of seen) if (!now.has(id)) sse.send('machine', { name: m.name, id, state: 'removed', previous: m.state, at });
          seen = now;
        }, POLL_MS);
        stop = () => { clearInterval(timer); resolve(); };
      });
    },
  }),
];
