/* float_ckpt.c - write a model as a float32 .safetensors checkpoint: a .cact
 * decoded (CQ matrices dequantised, FP16 tensors widened), or a checkpoint
 * with a LoRA adapter merged in (W += alpha/r A B, train/merge.h).  Every
 * tensor the forward reads is written; the heads are left out.  An
 * experiment helper (the QAT-vs-full-precision comparison in
 * docs/training.md): a decoded .cact can be fine-tuned by `needle finetune
 * --checkpoint`, and a merged checkpoint evaluated in float by `needle eval
 * --model X.safetensors --tokenizer TOK.model`.  It does not recover the
 * float weights of a .cact: the CQ rounding is already in them.
 *
 *   float_ckpt MODEL.cact|BASE.safetensors OUT.safetensors [ADAPTER.safetensors] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/params.h"
#include "model/weights.h"
#include "quant/cq.h"
#include "train/merge.h"
#include "train/train_ckpt.h"

/* One engine matrix [rows=out, cols=in] as floats. */
static void matrix_floats(const nd_matrix *M, float *out)
{
    if (M->kind != ND_MAT_CQ) {
        memcpy(out, M->f32, sizeof(float) * (size_t)M->rows * M->cols);
        return;
    }
    int sb = nd_cq_storage_bits(M->cq_bits);
    float *row = malloc(sizeof(float) * (size_t)M->cols_pad);
    for (int r = 0; row && r < M->rows; r++) {
        nd_cq_dequant_row(M->cq_idx + (size_t)r * (size_t)M->cols_pad * sb / 8,
                          M->cq_norms + (size_t)r * (size_t)(M->cols_pad / 128) * 2, M->cols, sb, M->codebook, row);
        memcpy(out + (size_t)r * M->cols, row, sizeof(float) * (size_t)M->cols);
    }
    free(row);
}

/* Copy one instance of parameter p from `base` (its scope's struct) into dst (checkpoint layout). */
static void copy_instance(const nd_param_desc *p, const nd_config *c, const void *base, float *dst)
{
    const void *f = nd_param_field_c(p, base);
    if (p->kind == ND_KIND_MATRIX) {
        const nd_matrix *M = f;
        float *tmp = malloc(sizeof(float) * (size_t)M->rows * M->cols);
        if (!tmp) return;
        matrix_floats(M, tmp);
        if (p->transpose) /* engine [out, in] -> kernel [in, out] */
            for (int r = 0; r < M->rows; r++)
                for (int k = 0; k < M->cols; k++) dst[(size_t)k * M->rows + r] = tmp[(size_t)r * M->cols + k];
        else memcpy(dst, tmp, sizeof(float) * (size_t)M->rows * M->cols);
        free(tmp);
    } else if (p->kind == ND_KIND_VECTOR) {
        memcpy(dst, *(const float *const *)f, sizeof(float) * (size_t)nd_param_elems(p, c, -1));
    } else {
        dst[0] = *(const float *)f;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: float_ckpt MODEL.cact|BASE.safetensors OUT.safetensors [ADAPTER.safetensors]\n");
        return 2;
    }
    nd_weights w;
    needle_error err;
    if (nd_weights_load(argv[1], &w, &err) || (argc == 4 && nd_lora_merge(&w, argv[3], argv[1], &err))) {
        fprintf(stderr, "float_ckpt: %s\n", err.message);
        return 1;
    }
    nd_train_model m;
    if (nd_train_model_create(&m, &w.cfg, &err)) {
        fprintf(stderr, "float_ckpt: %s\n", err.message);
        return 1;
    }
    const nd_config *c = &w.cfg;
    for (int i = 0; i < m.n_tensors; i++) {
        nd_tensor_info *t = &m.tensors[i];
        const nd_param_desc *p = t->param;
        if (t->role < 0) { /* heads: not written by this helper */
            t->absent = 1;
            continue;
        }
        float *dst = m.params + t->offset;
        if (p->scope == ND_SCOPE_GLOBAL) {
            copy_instance(p, c, &w, dst);
        } else if (p->scope == ND_SCOPE_SITE) {
            copy_instance(p, c, &w.sites[t->instance], dst);
        } else { /* LAYER: leading L axis */
            size_t per = t->count / (size_t)c->num_layers;
            for (int l = 0; l < c->num_layers; l++) copy_instance(p, c, &w.layers[l], dst + (size_t)l * per);
        }
    }
    int rc = nd_train_save_full(&m, argv[2], &err);
    if (rc) fprintf(stderr, "float_ckpt: %s\n", err.message);
    nd_train_model_free(&m);
    nd_weights_free(&w);
    return rc ? 1 : 0;
}
