/** The op handlers of all areas as one table by op id, which the session dispatches through. */
import { ARG_VIEWS, OP_ROWS, type ArgView, type OpArgs } from '../../protocol/index.js';
import type { OpHandlers, Reply, SessionState } from '../session-state.js';
import { contextOps } from './context.js';
import { launchOps, launchInPlace } from './launch.js';
import { memoryOps } from './memory.js';
import { moduleOps } from './modules.js';
import { streamOps } from './streams.js';
import { graphOps } from './graphs.js';
import { poolOps } from './pools.js';
import { copyOps } from './copies.js';
import { launchExOps } from './launch-ex.js';
import { queryOps } from './queries.js';

export { launchInPlace };

// Typed as the full table, so an op added to the spec without a handler fails to compile.
const HANDLERS: OpHandlers = { ...contextOps, ...memoryOps, ...moduleOps, ...launchOps, ...streamOps,
  ...graphOps, ...poolOps, ...copyOps, ...launchExOps, ...queryOps };

export type Handler = (s: SessionState, a: ArgView, blob: Buffer) => Reply | null;
const LAST_ID = Math.max(...OP_ROWS.map((r) => r.id));

/** Handler of each op id; undefined for an id the spec does not define. */
export const HANDLER_BY_ID: readonly (Handler | undefined)[] = (() => {
  const t = new Array<Handler | undefined>(LAST_ID + 1).fill(undefined);
  for (const r of OP_ROWS) t[r.id] = HANDLERS[r.name as keyof OpArgs] as Handler;
  return t;
})();

/** A fresh argument view for each op id, for one session to re-point at its frames. */
export function argViewsById(): (ArgView | undefined)[] {
  const t = new Array<ArgView | undefined>(LAST_ID + 1).fill(undefined);
  for (const r of OP_ROWS) t[r.id] = new ARG_VIEWS[r.name as keyof OpArgs]();
  return t;
}
