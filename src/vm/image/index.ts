/** Guest images: the boot initramfs, root disk bases from images, and per-machine overlays. */
export { ensureInitramfs, type Initramfs, type InitramfsOptions } from './initramfs.js';
export { resolveImage, isTarballRef, type ResolvedImage, type ImageKind } from './resolve.js';
export { createOverlay, buildExt4Qcow2 } from './ext4.js';
export { applyLayer, safeComponents, type LayerStats } from './layers.js';
export { unpackImageTarball, type ImageRunConfig, type UnpackedImage } from './tarball.js';
export { AGENT_GUEST_PATH, AGENT_PORT_NAME, AGENT_VSOCK_PORT } from './init-script.js';
export { pullImage, resolveReference, hostPlatform, type ImagePullResult, type PullOptions, type LayerEvent } from './pull.js';
export { listImages, removeImage, pruneImages, machinesByImage, type ImageEntry, type PruneResult, type RemoveResult } from './manage.js';
