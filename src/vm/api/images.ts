/** Guest images (not image/index.ts, which would load the initramfs and kernel code `image ls` never needs): pulled from an OCI registry, listed, removed and pruned (`smol image`). */

/** Pull an image reference into the local store; `onLayer` reports each layer's progress. */
export { pullImage, type ImagePullResult, type LayerEvent, type PullOptions } from '../image/pull.js';
/** The images in the store; removing one refuses an image a machine still uses, unless forced. */
export { listImages, removeImage, pruneImages, type ImageEntry, type PruneResult as ImagePruneResult, type RemoveResult } from '../image/manage.js';
