/** The CUDA remoting wire protocol: spec, generated tables, endpoints. No dependencies. */
export { OPS, PROTOCOL, canonicalSpec, type OpSpec } from './spec.js';
export { OP, OP_ROWS, PROTO_HASH, type OpRow } from './generated.js';
export { ARG_INDEX, ARG_VIEWS, ArgView, type OpArgs } from './args.js';
export { parseEndpoint, formatEndpoint, type Endpoint } from './endpoint.js';
export { encodeFrame, decodeHeader, decodeReply, type FrameHeader } from './frame.js';
