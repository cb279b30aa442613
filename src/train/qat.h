/* qat.h - fine-tuning under the numerics the export deploys (SPEC section
 * 12, `needle finetune --qat-bits`; ../shared/golden/deploy_numerics.md).
 * LoRA by default; full fine-tuning when --qat-bits asks for it.
 *
 * Forward:
 *   - every CQ matrix (model/params.def .cq: the embedding, the mHC phi
 *     projections, the engram tables and projections, and the LoRA targets
 *     q, k, v, gate, out) holds what the .cact will hold: CQ-quantised and
 *     dequantised at its bits-map width.  The frozen ones are quantised once,
 *     in place in m->params; the LoRA targets are merged (W + scale A B) and
 *     quantised again at every step into a separate slab.
 *   - activations at the Needle 2 A8 points (engram.e, attn.in, attn.out,
 *     logits.in) are fake-quantised to act_bits per position: one scale
 *     s = amax / (2^(b-1) - 1) per vector, codes rint(v / s) (half to even),
 *     value c * s.  K and V stay float (kv_bits 8 means no KV quantisation in
 *     Needle 2's reference).
 * Full fine-tuning (`--full --qat-bits 2|4`): the float weights live in a
 * master slab that the optimiser updates; before a forward, every CQ matrix
 * of m->params is the master's value CQ-quantised and dequantised, the other
 * parameters the master's own.  The gradients are those of the quantised
 * weights (straight through), applied to the master.  nd_qat_free leaves the
 * master's float weights in m->params, which is what the checkpoint holds.
 * Backward: the straight-through estimator - every quantiser is the identity
 * for gradients, so d/dA and d/dB of a target are those of the merged float
 * weight, with the input gradients taken through the quantised weights the
 * forward used.
 *
 * The forward values are the deploy values (c * s, and the dequantised CQ
 * rows), which the engine's int8 path must reproduce: the reference's
 * `v + stop_gradient(v' - v)` can differ from them by one float32 ulp.
 */
#ifndef ND_QAT_H
#define ND_QAT_H

#include "train/train_model.h"

typedef struct nd_qat {
    int bits;                           /* a uniform width (2, 4, ...), or 0 when bits_map is used */
    char bits_map[256];                 /* the checkpoint's weight_bits map ("" when bits is used) */
    int act_bits;                       /* activation width (0: activations stay float) */
    int target_bits[ND_LORA_TARGETS];   /* CQ width of each LoRA target */
    float *w;                           /* merged + quantised targets, [L][in][out] each */
    size_t off[ND_LORA_TARGETS];
    float *master;                      /* full fine-tuning: the float weights (n_master floats), else NULL */
    size_t n_master;
    int *width;                         /* full: CQ width of each tensor (0: not quantised) */
    int stale;                          /* full: the master moved since m->params was last derived from it */
} nd_qat;

/* Parse --qat-bits: "auto" (the config's weight_bits map, else 4), "none",
 * "2" or "4".  *bits gets the width (0 with a map or none), *use_map 1 for
 * the map; returns -1 for anything else. */
int nd_qat_parse_mode(const char *mode, const nd_config *cfg, int *bits, int *use_map);

/* Turn QAT on for a LoRA model (after nd_train_lora_create) or a full one
 * (after nd_train_enable_full): bits > 0 for a uniform width, else
 * cfg.weight_bits as the map.  LoRA: quantises the frozen CQ matrices in
 * place; full: copies the trainable weights to the master slab.  Refuses kv_bits 1..7 (CQ KV fake-quant is not
 * implemented in the trainer). */
int nd_qat_enable(nd_train_model *m, int bits, needle_error *err);
/* Full: the master's float weights go back to m->params first. */
void nd_qat_free(nd_train_model *m);

/* Before a forward. LoRA: merge and quantise the targets from the current A,
 * B. Full: m->params from the master, when it moved. */
void nd_qat_refresh(nd_train_model *m);

/* The trainable slab the optimiser updates: the master under full QAT
 * (NULL otherwise), and the number of its floats. */
float *nd_qat_master(nd_train_model *m, size_t *n);

/* The optimiser has updated the master (full QAT; a no-op otherwise). */
void nd_qat_master_moved(nd_train_model *m);

/* Fake-quantise each of the N rows of length D in place (act_bits > 0). */
void nd_qat_act_rows(float *x, int N, int D, int bits);

/* The adapter metadata values: qat_bits ("4", or "null"), qat_bits_map (the map, or "null"). */
void nd_qat_metadata(const nd_train_model *m, char *bits, size_t bits_n, char *map, size_t map_n);

#endif
