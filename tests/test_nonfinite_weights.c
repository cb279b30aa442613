/* test_nonfinite_weights.c - NaN or Inf weights are refused at load with the
 * tensor's name (issue 20, D12): in a .cact float vector, in a CQ matrix's
 * FP16 norms, and in a safetensors checkpoint.  Each case poisons one value
 * of a copy of a golden file; the untouched copy must still load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "model/cact/cact.h"
#include "model/weights.h"
#include "quant/cq.h"

/* A golden file's bytes (the library's bounded reader), or NULL. */
static uint8_t *slurp(const char *path, size_t *n)
{
    char *b = NULL;
    needle_error err = {0};
    return nd_read_file(path, &b, n, &err) ? NULL : (uint8_t *)b;
}

static void spill(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* Load path; expect success (want == NULL) or EFORMAT naming `want` and `what`. */
static void expect_load(const char *path, const char *want, const char *what)
{
    nd_weights w;
    needle_error err = {0};
    int rc = nd_weights_load(path, &w, &err);
    if (!want) {
        CHECKF(rc == 0, "%s", err.message);
    } else {
        CHECKF(rc == NEEDLE_EFORMAT && strstr(err.message, want) && strstr(err.message, what) &&
                   strstr(err.message, path),
               "rc %d: %s", rc, err.message);
        printf("  refused as expected: %s\n", err.message);
    }
    if (!rc) nd_weights_free(&w);
}

/* The directory entry of the first slot whose name contains `name` and whose
 * storage is `storage`; NULL if none. */
static const nd_cact_record *find_slot(const nd_cact_file *f, const nd_cact_slot *slots, const char *name, int storage,
                                       const char **slot_name)
{
    for (uint32_t i = 0; i < f->hdr.num_tensors; i++)
        if (slots[i].storage == storage && strstr(slots[i].name, name)) {
            *slot_name = slots[i].name;
            return &f->records[i];
        }
    return NULL;
}

static void test_cact(void)
{
    const char *golden = "tests/golden/tiny_w4.cact", *tmp = "build-tmp-nonfinite.cact";
    size_t n = 0;
    uint8_t *orig = slurp(golden, &n);
    CHECK(orig != NULL);
    if (!orig) return;
    nd_cact_file f;
    nd_cact_slot *slots = NULL;
    nd_config cfg;
    needle_error err = {0};
    CHECKF(nd_cact_parse(orig, n, golden, &f, &err) == 0 && nd_cact_resolve(&f, golden, &cfg, &slots, &err) == 0, "%s",
           err.message);
    const char *vec_name = NULL, *mat_name = NULL;
    const nd_cact_record *vec = find_slot(&f, slots, "norm", ND_SLOT_FLOAT, &vec_name);
    const nd_cact_record *mat = find_slot(&f, slots, "q_proj", ND_SLOT_QUANT, &mat_name);
    CHECK(vec && mat && vec->dtype == ND_CACT_FP16 && mat->dtype == ND_CACT_CQ);
    uint8_t *b = malloc(n);
    if (vec && mat && b) {
        spill(tmp, orig, n);
        expect_load(tmp, NULL, NULL);

        memcpy(b, orig, n);
        b[vec->offset + 2] = 0x00, b[vec->offset + 3] = 0x7E; /* element 1 = FP16 NaN */
        spill(tmp, b, n);
        expect_load(tmp, vec_name, "NaN at element 1");

        memcpy(b, orig, n);
        size_t norms = (size_t)mat->shape[0] * nd_cq_row_bytes((int)mat->shape[1], (int)mat->bits); /* codes, then norms */
        b[mat->offset + norms + 1] = 0x7C; /* the first group norm's exponent all ones: Inf */
        b[mat->offset + norms] = 0x00;
        spill(tmp, b, n);
        expect_load(tmp, mat_name, "non-finite CQ norm");
    }
    free(b);
    free(slots);
    nd_cact_close(&f);
    free(orig);
    unlink(tmp);
}

static void test_safetensors(void)
{
    const char *golden = "tests/golden/tiny.safetensors", *tmp = "build-tmp-nonfinite.safetensors";
    nd_safetensors st;
    needle_error err = {0};
    CHECKF(nd_st_open(golden, &st, &err) == 0, "%s", err.message);
    const nd_st_tensor *t = NULL;
    for (size_t i = 0; i < st.count && !t; i++)
        if (st.tensors[i].dtype == ND_ST_F32 && strstr(st.tensors[i].name, "q_proj")) t = &st.tensors[i];
    CHECK(t != NULL);
    size_t n = 0;
    uint8_t *b = slurp(golden, &n);
    if (t && b) {
        char name[160];
        snprintf(name, sizeof name, "%s", t->name);
        float inf = 1.0f / 0.0f;
        memcpy(b + t->file_offset + 3 * sizeof(float), &inf, sizeof inf);
        spill(tmp, b, n);
        expect_load(tmp, name, "Inf at element 3");
    }
    free(b);
    nd_st_close(&st);
    unlink(tmp);
}

int main(void)
{
    RUN(test_cact);
    RUN(test_safetensors);
    return check_summary();
}
