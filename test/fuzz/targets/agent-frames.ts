/**
 * The host's side of the agent channel: the bytes a guest (root in its VM, free to replace the agent)
 * writes on its port, through FrameDecoder and the payload decoders the client applies per frame type.
 * Properties: only ProtocolError escapes; the decoder never holds more than one incomplete frame; every
 * frame it yields respects its payload limit; and the input is fed in guest-chosen chunk sizes.
 */
import fc from 'fast-check';
import { FrameDecoder, ProtocolError, encodeFrame, findHello } from '../../../src/vm/agent/codec.js';
import { decodeError, decodeExit, decodeHello, decodeInfo, decodeU32, encodeHello } from '../../../src/vm/agent/payloads.js';
import { FrameType, HEADER_LENGTH, LAST_FRAME_TYPE } from '../../../src/vm/agent/protocol.js';
import { mutated } from '../lib/mutate.js';
import { FuzzFailure, expectOnly, type FuzzTarget } from '../lib/target.js';

const MAX = 64 * 1024;

const payloadFor = (type: number): fc.Arbitrary<Buffer> => {
  const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((u) => Buffer.from(u));
  if (type === FrameType.hello) {
    return fc.record({ version: fc.nat(), capabilities: fc.nat(), maxPayload: fc.nat(), window: fc.nat(), nonce: fc.nat(), name: fc.string({ maxLength: 40 }) })
      .map((h) => encodeHello(h));
  }
  if (type === FrameType.exit || type === FrameType.info) return bytes(16);
  return bytes(300);
};

const frame = fc.record({
  type: fc.oneof(fc.integer({ min: 1, max: LAST_FRAME_TYPE }), fc.constantFrom(0, LAST_FRAME_TYPE + 1, 255)),
  flags: fc.nat({ max: 255 }),
  stream: fc.oneof(fc.constantFrom(0, 1, 0x80000001, 0xffffffff), fc.nat()),
}).chain((f) => payloadFor(f.type).map((p) => ({ ...f, p })));

/** The first byte picks the chunk size the input is pushed in (1..256 bytes, or all at once). */
const structured = fc.tuple(fc.nat({ max: 255 }), fc.array(frame, { maxLength: 12 }))
  .map(([split, frames]) => Buffer.concat([Buffer.from([split]), ...frames.map((f) => {
    try { return encodeFrame(f.type, f.flags, f.stream, f.p); } catch { return Buffer.alloc(0); }
  })]));

function decodePayload(type: number, p: Buffer): void {
  switch (type) {
    case FrameType.hello: decodeHello(p); break;
    case FrameType.exit: decodeExit(p); break;
    case FrameType.error: decodeError(p); break;
    case FrameType.info: decodeInfo(p); break;
    case FrameType.started: case FrameType.window: decodeU32(p, 'frame'); break;
    default: break;
  }
}

export const agentFrames: FuzzTarget = {
  name: 'agent-frames',
  arbitrary: (seeds) => fc.oneof(structured, mutated(seeds, { maxLength: 1 << 18 })),
  run(input) {
    const split = input.length ? input[0] : 0;
    const body = input.subarray(1);
    findHello(body);
    const dec = new FrameDecoder(MAX);
    const step = split === 0 ? body.length || 1 : split;
    try {
      for (let at = 0; at < body.length; at += step) {
        for (const f of dec.push(body.subarray(at, at + step))) {
          if (f.payload.length > MAX) throw new FuzzFailure(`decoder yielded a ${f.payload.length}-byte payload past its ${MAX}-byte limit`);
          try { decodePayload(f.type, f.payload); } catch (err) { expectOnly(err, [ProtocolError], `decoding a type ${f.type} payload`); }
        }
        if (dec.pending > HEADER_LENGTH + MAX + step) throw new FuzzFailure(`decoder holds ${dec.pending} bytes, more than one frame`);
      }
    } catch (err) {
      expectOnly(err, [ProtocolError], 'FrameDecoder.push');
    }
    return Promise.resolve();
  },
};
