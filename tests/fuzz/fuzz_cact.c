/* fuzz_cact.c - libFuzzer harness for the .cact reader: container parse,
 * layout resolution, binding into nd_weights, dequantising every matrix's
 * first and last row, and the tokenizer blob.  Any input must give a clean
 * error or a model that can be used without reading out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/cact/cact.h"
#include "io/spm_model.h"
#include "model/weights.h"

static void touch(const nd_matrix *m)
{
    if (m->rows <= 0 || m->cols <= 0) return;
    float *row = malloc(sizeof(float) * (size_t)m->cols);
    if (!row) return;
    nd_matrix_dequant_rows(m, 0, 1, row);
    nd_matrix_dequant_rows(m, m->rows - 1, 1, row);
    free(row);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the input is copied so out-of-bounds reads past `size` are caught exactly */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    nd_weights w;
    needle_error err;
    if (nd_weights_load_cact_buffer(copy, size, "fuzz.cact", &w, &err) == 0) {
        touch(&w.embedding);
        for (int l = 0; l < w.cfg.num_layers; l++) {
            const nd_layer_weights *ly = &w.layers[l];
            touch(&ly->q_proj), touch(&ly->k_proj), touch(&ly->v_proj), touch(&ly->gate_proj), touch(&ly->out_proj);
            touch(&ly->phi_pre), touch(&ly->phi_post), touch(&ly->phi_res);
        }
        for (int s = 0; s < w.cfg.num_sites; s++)
            touch(&w.sites[s].tables), touch(&w.sites[s].key_proj), touch(&w.sites[s].value_proj);
        if (w.contrastive.present) touch(&w.contrastive.proj);
        if (w.confidence.present) touch(&w.confidence.proj);
        /* Needle 3 heads (seeds: tests/fuzz/seeds/fuzz_cact/v3_*, tools/make_v3_fuzz_seeds.py) */
        const nd_head_weights *hs[3] = {&w.contrastive, &w.confidence, &w.router};
        for (int k = 0; k < 3; k++)
            if (hs[k]->present && w.cfg.generation == 3)
                touch(&hs[k]->layer_probes), touch(&hs[k]->query), touch(&hs[k]->pool_proj);
        nd_vocab v;
        if (nd_vocab_from_blob(w.tokenizer_blob, w.tokenizer_blob_size, "fuzz.cact", &v, &err) == 0) nd_vocab_free(&v);
        nd_weights_free(&w);
    }
    free(copy);
    return 0;
}
