/**
 * Driver entry points of the areas added after the core (spec-areas/*), as plain data: each area keeps
 * its own table in driver/sigs-*.ts so that cuda.ts, the one module that imports koffi, binds them all.
 * A row is [exported symbol, koffi signature with NAME in place of the name, optional?]; an optional
 * symbol a driver lacks binds to null instead of failing the load.
 */
export type SigRow = readonly [symbol: string, signature: string] | readonly [symbol: string, signature: string, optional: 'optional'];
export type SigTable = Readonly<Record<string, SigRow>>;
type Fn = (...args: unknown[]) => number;
/** The bound functions of a table: an optional row may be null. */
export type FnsOf<T extends SigTable> = { [K in keyof T]: T[K] extends readonly [string, string, 'optional'] ? Fn | null : Fn };
