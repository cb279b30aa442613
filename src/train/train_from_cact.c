/* train_from_cact.c - a training model from a .cact deploy file.
 *
 * `needle finetune --checkpoint MODEL.cact` starts from the deploy file's
 * weights, dequantised: every CQ matrix is expanded row by row to float32 and
 * written in the checkpoint layout the trainer keeps (kernels [in, out],
 * LAYER tensors stacked on a leading L axis), FP16 vectors are widened.  The
 * result is the quantised model, not the float checkpoint it was built from:
 * the caller warns about that.  Heads are copied when their shapes fit the
 * config (the contrastive head's log_temp is not in a .cact and stays 0). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/params.h"
#include "model/weights.h"
#include "train/train_ckpt.h"

/* One instance of a parameter from w into the tensor's slab at dst. */
static int copy_instance(const nd_param_desc *p, const void *base, const nd_config *c, int head, float *dst,
                         float *rowbuf, const char *path, needle_error *err)
{
    if (p->kind == ND_KIND_SCALAR) {
        *dst = *(const float *)nd_param_field_c(p, base);
        return 0;
    }
    if (p->kind == ND_KIND_VECTOR) {
        const float *v = *(const float *const *)nd_param_field_c(p, base);
        int64_t n = nd_param_elems(p, c, head);
        if (!v) return nd_errorf(err, NEEDLE_EFORMAT, "%s: %s is missing", path, p->field_name);
        memcpy(dst, v, sizeof(float) * (size_t)n);
        return 0;
    }
    const nd_matrix *mx = nd_param_field_c(p, base);
    int64_t rows = nd_dim_value(c, p->rows, head), cols = nd_dim_value(c, p->cols, head);
    if (mx->rows != rows || mx->cols != cols)
        return nd_errorf(err, NEEDLE_EFORMAT, "%s: %s is %d x %d, the config needs %lld x %lld", path, p->field_name,
                         mx->rows, mx->cols, (long long)rows, (long long)cols);
    for (int r = 0; r < mx->rows; r++) {
        nd_matrix_dequant_rows(mx, r, 1, rowbuf);
        if (!p->transpose) {
            memcpy(dst + (size_t)r * (size_t)cols, rowbuf, sizeof(float) * (size_t)cols);
        } else { /* the checkpoint keeps the kernel [in, out] = [cols, rows] */
            for (int64_t k = 0; k < cols; k++) dst[(size_t)k * (size_t)rows + (size_t)r] = rowbuf[k];
        }
    }
    return 0;
}

int nd_train_model_load_cact(nd_train_model *m, const char *path, needle_error *err)
{
    nd_weights w;
    int rc = nd_weights_load_cact(path, &w, err);
    if (rc) return rc;
    if ((rc = nd_train_model_create(m, &w.cfg, err))) {
        nd_weights_free(&w);
        return rc;
    }
    const nd_config *c = &m->cfg;
    int64_t widest = 1;
    for (int i = 0; i < m->n_tensors; i++) {
        const nd_param_desc *p = m->tensors[i].param;
        int head = p->scope == ND_SCOPE_HEAD ? m->tensors[i].instance : -1;
        if (p->kind == ND_KIND_MATRIX && nd_dim_value(c, p->cols, head) > widest) widest = nd_dim_value(c, p->cols, head);
    }
    float *rowbuf = malloc(sizeof(float) * (size_t)widest);
    if (!rowbuf) rc = nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        nd_tensor_info *t = &m->tensors[i];
        const nd_param_desc *p = t->param;
        float *dst = m->params + t->offset;
        if (p->scope == ND_SCOPE_HEAD) {
            const nd_head_weights *h = nd_param_base_c(&w, p, t->instance);
            /* a head the file lacks, or one shaped unlike the config, stays zero (not trained anyway) */
            if (!h->present || h->num_probes != nd_dim_value(c, ND_DIM_PROBES, t->instance) ||
                h->out_dim != nd_head_out_dim(c, t->instance) || p->no_cact)
                continue;
            rc = copy_instance(p, h, c, t->instance, dst, rowbuf, path, err);
        } else if (p->scope == ND_SCOPE_LAYER) {
            size_t per = t->count / (size_t)c->num_layers;
            for (int l = 0; l < c->num_layers && !rc; l++)
                rc = copy_instance(p, nd_param_base_c(&w, p, l), c, -1, dst + (size_t)l * per, rowbuf, path, err);
        } else {
            rc = copy_instance(p, nd_param_base_c(&w, p, t->instance), c, -1, dst, rowbuf, path, err);
        }
    }
    free(rowbuf);
    nd_weights_free(&w);
    if (rc) nd_train_model_free(m);
    return rc;
}
