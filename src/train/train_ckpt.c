/* train_ckpt.c - reading and writing the training model by tensor name. */
#include "train/train_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"

int nd_train_model_load(nd_train_model *m, const char *path, int *n_ignored, needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(path, &st, err);
    if (rc) return rc;
    const char *cfg_json = nd_st_meta(&st, "config");
    if (!cfg_json) {
        nd_st_close(&st);
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: no \"config\" in __metadata__", path);
    }
    nd_config cfg;
    rc = nd_config_from_json(&cfg, cfg_json, strlen(cfg_json), path, err);
    if (!rc) rc = nd_train_model_create(m, &cfg, err);
    if (rc) {
        nd_st_close(&st);
        return rc;
    }
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        nd_tensor_info *t = &m->tensors[i];
        const nd_st_tensor *s = nd_st_find(&st, t->name);
        if (!s) {
            if (t->role >= 0) rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s is missing", path, t->name);
            continue; /* a head the checkpoint does not have stays zero */
        }
        int same = s->numel == t->count;
        if (t->role >= 0) { /* the forward's tensors must match exactly */
            same = same && s->ndim == t->ndim;
            for (int k = 0; same && k < t->ndim; k++) same = s->shape[k] == t->shape[k];
        }
        if (!same) {
            rc = nd_errorf(err, NEEDLE_EFORMAT, "%s: tensor %s has %zu elements (ndim %d), the config needs %zu",
                           path, t->name, s->numel, s->ndim, t->count);
            break;
        }
        if (t->role < 0) { /* heads keep the file's own shape (log_temp may be () or (1,)) */
            t->ndim = s->ndim;
            for (int k = 0; k < 4; k++) t->shape[k] = k < s->ndim ? s->shape[k] : 1;
        }
        rc = nd_st_read_f32(s, m->params + t->offset, path, err);
    }
    int ignored = 0;
    for (size_t i = 0; i < st.count; i++)
        if (nd_train_find(m, st.tensors[i].name) < 0) ignored++;
    if (n_ignored) *n_ignored = ignored;
    nd_st_close(&st);
    if (rc) nd_train_model_free(m);
    return rc;
}

int nd_train_save_full(const nd_train_model *m, const char *path, needle_error *err)
{
    nd_st_out_tensor *out = calloc((size_t)m->n_tensors, sizeof *out);
    if (!out) return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < m->n_tensors; i++) {
        const nd_tensor_info *t = &m->tensors[i];
        out[i].name = t->name;
        out[i].dtype = ND_ST_F32;
        out[i].ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) out[i].shape[k] = t->shape[k];
        out[i].data = m->params + t->offset;
    }
    char *cfg = nd_config_to_json(&m->cfg);
    const char *keys[2] = {"format", "config"};
    const char *vals[2] = {"needle-checkpoint", cfg ? cfg : "{}"};
    int rc = nd_st_write(path, out, (size_t)m->n_tensors, keys, vals, 2, err);
    free(cfg);
    free(out);
    return rc;
}

int nd_train_save_lora(const nd_train_model *m, const char *path, needle_error *err)
{
    if (!m->lora) return nd_errorf(err, NEEDLE_ESTATE, "%s: the model has no LoRA adapter to save", path);
    nd_st_out_tensor out[2 * ND_LORA_TARGETS];
    char names[2 * ND_LORA_TARGETS][160];
    int L = m->cfg.num_layers, r = m->lora_rank;
    for (int t = 0; t < ND_LORA_TARGETS; t++) {
        int in, o;
        nd_train_lora_dims(m, t, &in, &o);
        snprintf(names[2 * t], sizeof names[0], "%s.lora_A", nd_train_lora_target_name(t));
        snprintf(names[2 * t + 1], sizeof names[0], "%s.lora_B", nd_train_lora_target_name(t));
        out[2 * t] = (nd_st_out_tensor){names[2 * t], ND_ST_F32, 3, {L, in, r}, m->lora + m->lora_a_off[t]};
        out[2 * t + 1] = (nd_st_out_tensor){names[2 * t + 1], ND_ST_F32, 3, {L, r, o}, m->lora + m->lora_b_off[t]};
    }
    char rank[32], alpha[64];
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(alpha, sizeof alpha, "%.9g", (double)(m->lora_scale * (float)r));
    char *cfg = nd_config_to_json(&m->cfg);
    const char *keys[5] = {"format", "rank", "alpha", "targets", "config"};
    const char *vals[5] = {"needle-lora", rank, alpha, "q_proj,k_proj,v_proj,gate_proj,out_proj", cfg ? cfg : "{}"};
    int rc = nd_st_write(path, out, 2 * ND_LORA_TARGETS, keys, vals, 5, err);
    free(cfg);
    return rc;
}
