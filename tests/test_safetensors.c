/* test_safetensors.c - the safetensors reader/writer and the float weight loader.
 *
 * Spot values of tests/golden/tiny.safetensors were read from the file with
 * NumPy (np.frombuffer on the data_offsets ranges), not with this code.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/fp16.h"
#include "io/safetensors.h"
#include "model/weights.h"

#define GOLDEN "tests/golden/tiny.safetensors"

static char tmp_path[256];
static const char *tmp_file(const char *tag)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/needle_test_st_%ld_%s.safetensors", (long)getpid(), tag);
    return tmp_path;
}


static void check_golden_values(const nd_weights *w, float tol)
{
    const nd_config *c = &w->cfg;
    CHECK(c->d_model == 128 && c->num_layers == 4 && c->num_heads == 4 && c->num_kv_heads == 2);
    CHECK(c->vocab_size == 8192 && c->engram_slots == 1024 && c->num_sites == 2 && c->engram_layers[1] == 3);
    CHECK(c->head_dim == 32 && c->kv_dim == 64 && c->num_tables == 2 && c->engram_sub == 64 && c->hada_n == 128);
    CHECK(w->embedding.rows == 8192 && w->embedding.cols == 128);
#define G(got, want) CHECKF(fabsf((got) - (want)) <= tol * (1.0f + fabsf(want)), "%s = %.9g want %.9g", #got, (double)(got), (double)(want))
    G(w->embedding.f32[5 * 128 + 7], -0.0555038378f);
    const nd_layer_weights *l0 = &w->layers[0], *l1 = &w->layers[1], *l2 = &w->layers[2], *l3 = &w->layers[3];
    CHECK(l2->q_proj.rows == 128 && l2->q_proj.cols == 128 && l1->k_proj.rows == 64 && l1->k_proj.cols == 128);
    G(l2->q_proj.f32[10 * 128 + 3], -0.0833354965f);      /* q_proj.kernel[2, in 3, out 10] */
    G(l1->k_proj.f32[63 * 128 + 100], 0.160878703f);      /* k_proj.kernel[1, 100, 63] */
    G(l0->out_proj.f32[1 * 128 + 120], -0.0338337682f);   /* out_proj.kernel[0, in 120, out 1] */
    CHECK(l1->phi_res.rows == 16 && l1->phi_res.cols == 512 && l3->phi_pre.rows == 4);
    G(l1->phi_res.f32[6 * 512 + 100], 0.00760296965f);    /* mhc_phi_res[1, 100, 6] */
    G(l3->phi_pre.f32[2 * 512 + 511], 0.0362243727f);     /* mhc_phi_pre[3, 511, 2] */
    G(l0->phi_post.f32[3 * 512 + 7], 0.10517507f);        /* mhc_phi_post[0, 7, 3] */
    CHECK(w->sites[1].layer == 3 && w->sites[1].tables.rows == 2048 && w->sites[1].tables.cols == 64);
    G(w->sites[1].tables.f32[(1 * 1024 + 1000) * 64 + 63], 0.202600852f);
    G(w->sites[0].key_proj.f32[5 * 128 + 100], -0.145046353f);  /* engrams_0.key_proj.kernel[100, 5] */
    G(w->sites[1].value_proj.f32[0 * 128 + 127], 0.0206012372f); /* [127, 0] */
    G(w->sites[1].taps[3 * 128 + 100], -0.570051372f);
    CHECK(w->confidence.present && w->confidence.num_probes == 8 && w->confidence.proj.rows == 1 &&
          w->confidence.proj.cols == 1024);
    G(w->confidence.proj.f32[1000], -0.0153228603f);
    G(w->confidence.bias[0], -0.0549422875f);
    CHECK(w->contrastive.present && w->contrastive.out_dim == 128 && w->contrastive.proj.cols == 512);
    G(w->contrastive.log_temp, -2.65926003f);
    G(w->contrastive.proj.f32[77 * 512 + 300], -0.0508103967f);
    G(w->contrastive.probes[3 * 128 + 127], -0.100553453f);
    CHECK(w->contrastive.bias && w->contrastive.bias[0] == 0.0f && w->contrastive.bias[127] == 0.0f);
    G(l2->attn_gate, 0.511300266f);
    G(l3->a_res, 0.50712347f);
    G(l1->b_res[2 * 4 + 3], -0.0839868486f);
    G(l2->b_pre[1], -0.409178138f);
    G(l3->k_norm[31], 0.128593072f);
    G(l0->d3[127], -0.0722708479f);
    G(w->final_norm[64], 0.0609046854f);
#undef G
}

static void test_golden_load(void)
{
    nd_weights w;
    needle_error err;
    int rc = nd_weights_load(GOLDEN, &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc) return;
    check_golden_values(&w, 0.0f);
    /* F32 tensors in the engine's layout are used in place, not copied */
    CHECK((const uint8_t *)w.embedding.f32 >= w.map.data && (const uint8_t *)w.embedding.f32 < w.map.data + w.map.size);
    nd_weights_free(&w);
    CHECK(w.layers == NULL && w.owned == NULL);
}

static void test_reader_golden(void)
{
    nd_safetensors st;
    needle_error err;
    CHECKF(nd_st_open(GOLDEN, &st, &err) == 0, "%s", err.message);
    CHECK(st.count == 39);
    CHECK(st.data_start == 8 + 4224);
    const char *fmt = nd_st_meta(&st, "format");
    CHECK(fmt && strcmp(fmt, "needle-checkpoint") == 0);
    CHECK(nd_st_meta(&st, "config") && strstr(nd_st_meta(&st, "config"), "\"d_model\": 128"));
    const nd_st_tensor *t = nd_st_find(&st, "stack.mhc_b_res");
    CHECK(t && t->dtype == ND_ST_F32 && t->ndim == 3 && t->shape[0] == 4 && t->numel == 64 && t->nbytes == 256);
    CHECK(t && t->file_offset == 8 + 4224 + 6844104);
    CHECK(nd_st_find(&st, "nope") == NULL);
    nd_st_close(&st);
}

/* Re-write the golden file through the writer, optionally converting every
 * tensor to F16/BF16, dropping one tensor or changing one shape. */
static int rewrite_golden(const char *out, nd_st_dtype dtype, const char *drop, const char *reshape, needle_error *err)
{
    nd_safetensors st;
    int rc = nd_st_open(GOLDEN, &st, err);
    if (rc) return rc;
    nd_st_out_tensor *t = calloc(st.count, sizeof *t);
    void **bufs = calloc(st.count, sizeof *bufs);
    size_t n = 0;
    for (size_t i = 0; i < st.count; i++) {
        const nd_st_tensor *s = &st.tensors[i];
        if (drop && strcmp(s->name, drop) == 0) continue;
        nd_st_out_tensor *o = &t[n];
        o->name = s->name;
        o->ndim = s->ndim;
        memcpy(o->shape, s->shape, sizeof o->shape);
        if (reshape && strcmp(s->name, reshape) == 0) { /* same bytes, wrong shape */
            o->shape[0] = s->shape[1];
            o->shape[1] = s->shape[0];
        }
        o->dtype = dtype;
        if (dtype == ND_ST_F32) {
            o->data = s->data;
        } else {
            uint16_t *h = malloc(s->numel * 2 + 2);
            for (size_t k = 0; k < s->numel; k++) {
                float f = nd_st_get_f32(s, k);
                h[k] = dtype == ND_ST_F16 ? nd_float_to_half(f) : (uint16_t)(nd_bits_from_f32(f) >> 16);
            }
            bufs[i] = h;
            o->data = h;
        }
        n++;
    }
    const char *keys[2] = {"format", "config"};
    const char *vals[2] = {"needle-checkpoint", nd_st_meta(&st, "config")};
    rc = nd_st_write(out, t, n, keys, vals, 2, err);
    for (size_t i = 0; i < st.count; i++) free(bufs[i]);
    free(bufs);
    free(t);
    nd_st_close(&st);
    return rc;
}

static void test_rewrite_round_trip(void)
{
    needle_error err;
    const char *p = tmp_file("copy");
    CHECKF(rewrite_golden(p, ND_ST_F32, NULL, NULL, &err) == 0, "%s", err.message);
    nd_weights w;
    CHECKF(nd_weights_load(p, &w, &err) == 0, "%s", err.message);
    check_golden_values(&w, 0.0f);
    nd_weights_free(&w);
    /* layout written: header padded with spaces to a multiple of 8, sorted names */
    nd_safetensors st;
    CHECK(nd_st_open(p, &st, &err) == 0);
    CHECK(st.data_start % 8 == 0);
    CHECK(st.map.data[st.data_start - 1] == '}' || st.map.data[st.data_start - 1] == ' ');
    for (size_t i = 1; i < st.count; i++) CHECK(strcmp(st.tensors[i - 1].name, st.tensors[i].name) < 0);
    for (size_t i = 1; i < st.count; i++) CHECK(st.tensors[i].file_offset == st.tensors[i - 1].file_offset + st.tensors[i - 1].nbytes);
    nd_st_close(&st);
    unlink(p);
}

static void test_half_formats(void)
{
    needle_error err;
    const char *p = tmp_file("f16");
    CHECKF(rewrite_golden(p, ND_ST_F16, NULL, NULL, &err) == 0, "%s", err.message);
    nd_weights w;
    CHECKF(nd_weights_load(p, &w, &err) == 0, "%s", err.message);
    if (!err.code) check_golden_values(&w, 1e-3f); /* half keeps 11 significant bits */
    nd_weights_free(&w);
    p = tmp_file("bf16");
    CHECKF(rewrite_golden(p, ND_ST_BF16, NULL, NULL, &err) == 0, "%s", err.message);
    nd_error_clear(&err);
    CHECKF(nd_weights_load(p, &w, &err) == 0, "%s", err.message);
    if (!err.code) check_golden_values(&w, 8e-3f); /* bf16 keeps 8 */
    nd_weights_free(&w);
    unlink(p);
    unlink(tmp_file("f16"));
}

static void test_missing_or_misshaped(void)
{
    needle_error err;
    const char *p = tmp_file("bad");
    nd_weights w;
    CHECK(rewrite_golden(p, ND_ST_F32, "stack.layers.block.self_attn.k_norm.scale", NULL, &err) == 0);
    CHECK(nd_weights_load(p, &w, &err) == NEEDLE_EFORMAT);
    CHECKF(strstr(err.message, "stack.layers.block.self_attn.k_norm.scale") && strstr(err.message, "missing"), "%s",
           err.message);
    CHECK(rewrite_golden(p, ND_ST_F32, NULL, "engrams_1.embedding", &err) == 0);
    CHECK(nd_weights_load(p, &w, &err) == NEEDLE_EFORMAT);
    CHECKF(strstr(err.message, "engrams_1.embedding") && strstr(err.message, "shape (1024,2,64), expected (2,1024,64)"), "%s", err.message);
    /* heads are optional: dropping a whole head is fine, half a head is not */
    CHECK(rewrite_golden(p, ND_ST_F32, "confidence_head.probes", NULL, &err) == 0);
    CHECKF(nd_weights_load(p, &w, &err) == 0, "%s", err.message);
    CHECK(!w.confidence.present && w.contrastive.present);
    nd_weights_free(&w);
    CHECK(rewrite_golden(p, ND_ST_F32, "contrastive_head.log_temp", NULL, &err) == 0);
    CHECK(nd_weights_load(p, &w, &err) == NEEDLE_EFORMAT);
    CHECKF(strstr(err.message, "contrastive_head.log_temp") != NULL, "%s", err.message);
    unlink(p);
}

static void test_writer_generic(void)
{
    /* scalars, 4-D shapes, zero-size tensors, metadata with escapes */
    float a[24], s = 3.5f;
    for (int i = 0; i < 24; i++) a[i] = (float)i * 0.5f;
    uint16_t h[3] = {0x3c00, 0xc000, 0x7bff}; /* 1, -2, 65504 */
    nd_st_out_tensor t[4] = {
        {"z.lora_B", ND_ST_F32, 4, {1, 2, 3, 4}, a},
        {"a.scalar", ND_ST_F32, 0, {0}, &s},
        {"m.half", ND_ST_F16, 1, {3}, h},
        {"e.empty", ND_ST_F32, 2, {0, 5}, NULL},
    };
    const char *keys[2] = {"format", "note"};
    const char *vals[2] = {"needle-lora", "quote \" backslash \\ caf\xC3\xA9"};
    needle_error err;
    const char *p = tmp_file("gen");
    CHECKF(nd_st_write(p, t, 4, keys, vals, 2, &err) == 0, "%s", err.message);
    nd_safetensors st;
    CHECKF(nd_st_open(p, &st, &err) == 0, "%s", err.message);
    CHECK(st.count == 4 && strcmp(st.tensors[0].name, "a.scalar") == 0);
    const nd_st_tensor *x = nd_st_find(&st, "a.scalar");
    CHECK(x && x->ndim == 0 && x->numel == 1 && nd_st_get_f32(x, 0) == 3.5f);
    x = nd_st_find(&st, "z.lora_B");
    CHECK(x && x->ndim == 4 && x->shape[3] == 4 && x->numel == 24 && nd_st_get_f32(x, 23) == 11.5f);
    x = nd_st_find(&st, "m.half");
    float f[3];
    CHECK(x && nd_st_read_f32(x, f, p, &err) == 0 && f[0] == 1.0f && f[1] == -2.0f && f[2] == 65504.0f);
    x = nd_st_find(&st, "e.empty");
    CHECK(x && x->numel == 0 && x->nbytes == 0);
    CHECK(nd_st_meta(&st, "note") && strcmp(nd_st_meta(&st, "note"), vals[1]) == 0);
    nd_st_close(&st);
    /* refused: duplicate names, reserved name, missing data */
    nd_st_out_tensor dup[2] = {{"x", ND_ST_F32, 0, {0}, &s}, {"x", ND_ST_F32, 0, {0}, &s}};
    CHECK(nd_st_write(p, dup, 2, NULL, NULL, 0, &err) == NEEDLE_EINVAL);
    dup[1].name = "__metadata__";
    CHECK(nd_st_write(p, dup, 2, NULL, NULL, 0, &err) == NEEDLE_EINVAL);
    nd_st_out_tensor nodata = {"y", ND_ST_F32, 1, {2}, NULL};
    CHECK(nd_st_write(p, &nodata, 1, NULL, NULL, 0, &err) == NEEDLE_EINVAL);
    unlink(p);
}

/* Build a file image: u64 header length + header + data bytes. */
static size_t image(uint8_t *buf, const char *header, size_t data_len)
{
    size_t n = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, 0, data_len);
    return 8 + n + data_len;
}

static void test_reader_rejects(void)
{
    static const struct {
        const char *header;
        size_t data_len;
        const char *needle; /* expected in the message */
    } bad[] = {
        {"[]", 0, "'{'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", 8, "trailing comma"},
        {"{\"a\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "outside"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "outside"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{}}", 8, "duplicate"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
        {"{\"__metadata__\":[]}", 0, "not an object"},
        {"{\"a\":[]}", 0, "not an object"},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "empty"},
    };
    uint8_t buf[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = image(buf, bad[i].header, bad[i].data_len);
        nd_safetensors st;
        needle_error err = {0, ""};
        int rc = nd_st_parse(buf, n, "x.safetensors", &st, &err);
        CHECKF(rc == NEEDLE_EFORMAT, "case %zu rc %d: %s", i, rc, err.message);
        CHECKF(strstr(err.message, bad[i].needle) && strncmp(err.message, "x.safetensors: ", 15) == 0,
               "case %zu: <%s> lacks <%s>", i, err.message, bad[i].needle);
        CHECK(st.tensors == NULL && st.count == 0);
    }
    /* header length: past the end, and a file too short to hold it */
    nd_safetensors st;
    needle_error err;
    size_t n = image(buf, "{}", 0);
    buf[0] = 3; /* claims 3 bytes of header: "{}" plus one more than the file has */
    CHECK(nd_st_parse(buf, n, "x", &st, &err) == NEEDLE_EFORMAT);
    buf[0] = 0xff;
    buf[7] = 0xff;
    CHECK(nd_st_parse(buf, n, "x", &st, &err) == NEEDLE_EFORMAT && strstr(err.message, "past the end"));
    CHECK(nd_st_parse(buf, 7, "x", &st, &err) == NEEDLE_EFORMAT && strstr(err.message, "too short"));
    /* valid minimal forms: empty header object, trailing spaces, zero-size tensor */
    n = image(buf, "{}      ", 0);
    CHECK(nd_st_parse(buf, n, "x", &st, &err) == 0 && st.count == 0);
    nd_st_close(&st);
    n = image(buf, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                   "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
    CHECKF(nd_st_parse(buf, n, "x", &st, &err) == 0, "%s", err.message);
    float f;
    CHECK(st.count == 2 && nd_st_read_f32(nd_st_find(&st, "b"), &f, "x", &err) == NEEDLE_EUNSUPPORTED);
    nd_st_close(&st);
    /* missing file */
    CHECK(nd_st_open("/nonexistent/x.safetensors", &st, &err) == NEEDLE_EIO);
}

static void test_dispatch_cact(void)
{
    /* the .cact tag routes to the .cact loader (another module) */
    nd_weights w;
    needle_error err;
    int rc = nd_weights_load("tests/golden/tiny_w4.cact", &w, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (!rc) {
        CHECK(w.cfg.d_model == 128 && w.cfg.num_layers == 4 && w.embedding.kind == ND_MAT_CQ);
        nd_weights_free(&w);
    }
    /* a garbage file is reported as a bad safetensors file, not a crash */
    const char *p = tmp_file("junk");
    FILE *fp = fopen(p, "wb");
    fputs("hello world, not weights", fp);
    fclose(fp);
    CHECK(nd_weights_load(p, &w, &err) == NEEDLE_EFORMAT);
    unlink(p);
}

int main(void)
{
    RUN(test_reader_golden);
    RUN(test_golden_load);
    RUN(test_rewrite_round_trip);
    RUN(test_half_formats);
    RUN(test_missing_or_misshaped);
    RUN(test_writer_generic);
    RUN(test_reader_rejects);
    RUN(test_dispatch_cact);
    return check_summary();
}
