/** The shape of one op in the wire spec (spec.ts), and the two ways to declare one. */
export interface OpSpec {
  readonly id: number;
  readonly name: string;
  /** Names of the u64 arguments, in wire order. */
  readonly args: readonly string[];
  /** Names of the u64 results of a synchronous op. */
  readonly outs: readonly string[];
  /** Fire-and-forget: no reply; a failure becomes the session's pending error. */
  readonly async?: boolean;
  /** What the trailing blob carries, for documentation and bounds checks. */
  readonly blobIn?: string;
  readonly blobOut?: string;
}

export const op = (id: number, name: string, args: string[], outs: string[] = [], extra: Partial<OpSpec> = {}): OpSpec => ({ id, name, args, outs, ...extra });
export const fire = (id: number, name: string, args: string[], extra: Partial<OpSpec> = {}): OpSpec => op(id, name, args, [], { async: true, ...extra });
