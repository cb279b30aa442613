/* merge.h - folding a LoRA adapter into float weights (SPEC 9: W += (alpha/r) A B).
 *
 * The adapter is what `needle finetune` writes: for each target kernel
 * (q, k, v, gate, out of every layer) `<kernel name>.lora_A` (L, in, r) and
 * `.lora_B` (L, r, out), with metadata rank and alpha, and optionally
 * base_checksum (see nd_train_base_checksum), which is checked against the
 * base checkpoint when one is named. */
#ifndef ND_MERGE_H
#define ND_MERGE_H

#include "model/weights.h"
#include "needle.h"

/* Add the adapter's deltas into w's projection matrices, which must be float
 * ([out, in], as nd_weights_load_safetensors leaves them, in owned memory).
 * base_path (may be NULL) is the checkpoint w came from, for the checksum.
 * On failure w is unchanged. */
int nd_lora_merge(nd_weights *w, const char *adapter_path, const char *base_path, needle_error *err);

/* The CQ scheme a QAT adapter was trained for (SPEC 12; metadata qat_bits /
 * qat_bits_map): out receives the bits map to export with ("default=4", or
 * the recorded map), or "" for an adapter trained in full precision (or
 * written before QAT), which leaves the choice to the caller.  bits / bits_map
 * are what the user asked for (NULL when not given): a request that would
 * deploy other numerics than the adapter was trained for is NEEDLE_EINVAL. */
int nd_lora_deploy_scheme(const char *adapter_path, const char *bits, const char *bits_map, char *out, size_t n,
                          needle_error *err);

#endif
