/* cmd_inspect.c - `needle inspect FILE`: the geometry and tensors of a .cact
 * or .safetensors file.
 *
 * For a .cact every directory record is listed with the name its position
 * gives it; a file whose records do not fit its header is still listed, with
 * the reason, so inspect is also the tool for looking at a broken file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/file.h"
#include "core/file_kind.h"
#include "model/cact/cact.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "quant/cq.h"

static const char *dtype_name(int dt)
{
    switch (dt) {
    case ND_CACT_FP16: return "FP16";
    case ND_CACT_FP32: return "FP32";
    case ND_CACT_CQ: return "CQ";
    case ND_CACT_RAW: return "RAW";
    default: return "?";
    }
}

static void shape_text(const uint32_t *shape, int ndim, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "(");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(out + k, n - k, d ? ",%u" : "%u", shape[d]);
    if (k < n) snprintf(out + k, n - k, ndim == 1 ? ",)" : ")");
}

static void print_geometry(const nd_cact_header *h)
{
    int v3 = h->version == 3;
    uint32_t max_sites = v3 ? ND_CACT_MAX_SITES_V3 : 4;
    printf("generation Needle %d  (tag 0x%08X, %zu-byte header)\n", v3 ? 3 : 2, v3 ? ND_CACT_TAG_V3 : ND_CACT_TAG,
           nd_cact_header_bytes(h));
    if (v3)
        printf("geometry   vocab %u  out_vocab %u  d_model %u  heads %u/%u (qk_head_dim %u, v_head_dim %u)  layers %u  "
               "max_seq_len %u\n",
               h->vocab, h->out_vocab, h->d_model, h->num_heads, h->num_kv_heads, h->head_dim, h->v_head_dim,
               h->num_layers, h->max_seq_len);
    else
        printf("geometry   vocab %u  d_model %u  heads %u/%u (head_dim %u)  layers %u  max_seq_len %u\n", h->vocab,
               h->d_model, h->num_heads, h->num_kv_heads, h->head_dim, h->num_layers, h->max_seq_len);
    printf("           mhc lanes %u  hadamard %u  rope_theta %g  codebook_len %u\n", h->mhc_lanes, h->hada_n,
           (double)h->rope_theta, h->codebook_len);
    if (v3) {
        printf("attention  sliding_window %u  global_mask_lo 0x%08X  global_mask_hi 0x%08X  global layers", h->sliding_window,
               h->global_mask_lo, h->global_mask_hi);
        uint64_t mask = (uint64_t)h->global_mask_hi << 32 | h->global_mask_lo;
        for (uint32_t l = 0; l < 64; l++)
            if (mask >> l & 1u) printf(" %u", l);
        printf("  qkv_conv_taps %u\n", h->qkv_conv_taps);
    }
    printf("engram     orders");
    for (uint32_t i = 0; i < h->num_orders && i < 4; i++) printf(" %u", h->orders[i]);
    printf("  sites");
    for (uint32_t i = 0; i < h->num_sites && i < max_sites; i++) printf(" %u", h->sites[i]);
    printf("  tables %u x %u slots x %u  taps %u dilation %u", h->num_engram_tables, h->engram_slots,
           h->engram_sub_dim, h->conv_taps, h->conv_dilation);
    if (v3) printf("  seed_heads %u", h->engram_seed_heads);
    printf("\n");
    printf("kv         window %u  kv_bits %u\n", h->kv_window, h->kv_bits);
}

static int inspect_cact(const char *path)
{
    nd_cact_file f;
    needle_error err;
    if (nd_cact_open(path, &f, &err)) return cli_fail("inspect", err.message);
    printf("file       %s  (.cact, %zu bytes, %u tensors)\n", path, f.size, f.hdr.num_tensors);
    print_geometry(&f.hdr);
    nd_config cfg;
    nd_cact_slot *slots = NULL;
    int layout_rc = nd_cact_resolve(&f, path, &cfg, &slots, &err);
    uint64_t by_dtype[5] = {0}, params = 0, cq_params[6] = {0};
    printf("\n  %4s  %-26s %-5s %-16s %-5s %12s %10s\n", "#", "name", "dtype", "shape", "bits", "offset", "bytes");
    for (uint32_t i = 0; i < f.hdr.num_tensors; i++) {
        const nd_cact_record *r = &f.records[i];
        char shape[64], name[64];
        shape_text(r->shape, r->ndim, shape, sizeof shape);
        snprintf(name, sizeof name, "%s", slots ? slots[i].name : "?");
        uint64_t elems = 1;
        for (int d = 0; d < r->ndim; d++) elems *= r->shape[d];
        if (r->dtype != ND_CACT_RAW) params += elems;
        if (r->dtype == ND_CACT_CQ && r->bits <= 5) cq_params[r->bits] += elems;
        by_dtype[r->dtype] += r->nbytes;
        printf("  %4u  %-26s %-5s %-16s %-5s %12llu %10llu\n", i, name, dtype_name(r->dtype), shape,
               r->dtype == ND_CACT_CQ ? (r->bits == 1 ? "1" : nd_cq_bits_name((int)r->bits)) : "-", (unsigned long long)r->offset,
               (unsigned long long)r->nbytes);
    }
    printf("\ntotals     %llu parameters  %.2f MB file\n", (unsigned long long)params, (double)f.size / 1e6);
    printf("           CQ %.2f MB  FP16 %.2f MB  FP32 %.2f MB  tokenizer %.2f MB\n", (double)by_dtype[ND_CACT_CQ] / 1e6,
           (double)by_dtype[ND_CACT_FP16] / 1e6, (double)by_dtype[ND_CACT_FP32] / 1e6, (double)by_dtype[ND_CACT_RAW] / 1e6);
    printf("           CQ parameters by width:");
    for (int b = 1; b <= 5; b++)
        if (cq_params[b]) printf("  %s-bit %llu", b == 1 ? "1" : nd_cq_bits_name(b), (unsigned long long)cq_params[b]);
    printf("\n");
    free(slots);
    nd_cact_close(&f);
    if (layout_rc) {
        fprintf(stderr, "needle inspect: the records do not form a loadable model: %s\n", err.message);
        return 1;
    }
    return 0;
}

static int inspect_safetensors(const char *path)
{
    nd_safetensors st;
    needle_error err;
    if (nd_st_open(path, &st, &err)) return cli_fail("inspect", err.message);
    printf("file       %s  (.safetensors, %zu bytes, %zu tensors)\n", path, st.map.size, st.count);
    const char *cj = nd_st_meta(&st, "config");
    nd_config cfg;
    if (cj && nd_config_from_json(&cfg, cj, strlen(cj), path, &err) == 0) {
        nd_cact_header h;
        nd_cact_config_to_header(&cfg, cfg.kv_window, &h);
        print_geometry(&h);
        printf("           (kv window 0 = from the budget: %d)\n", nd_config_effective_window(&cfg));
    } else {
        printf("geometry   %s\n", cj ? err.message : "no config in __metadata__");
    }
    uint64_t params = 0, bytes = 0;
    printf("\n  %4s  %-48s %-5s %-20s %10s\n", "#", "name", "dtype", "shape", "bytes");
    for (size_t i = 0; i < st.count; i++) {
        const nd_st_tensor *t = &st.tensors[i];
        char shape[96];
        size_t k = (size_t)snprintf(shape, sizeof shape, "(");
        for (int d = 0; d < t->ndim && k < sizeof shape; d++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, t->ndim == 1 ? ",)" : ")");
        params += t->numel;
        bytes += t->nbytes;
        printf("  %4zu  %-48s %-5s %-20s %10zu\n", i, t->name, nd_st_dtype_name(t->dtype), shape, t->nbytes);
    }
    printf("\ntotals     %llu parameters  %.2f MB of tensor data\n", (unsigned long long)params, (double)bytes / 1e6);
    nd_st_close(&st);
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *to = argc == 2 ? stdout : stderr;
        fprintf(to, "usage: needle inspect FILE.cact|FILE.safetensors\n"
                    "Show the geometry, every tensor (dtype, shape, CQ bits, size), totals and the KV window.\n");
        return argc == 2 ? 0 : 2;
    }
    const char *path = argv[1];
    needle_error err = {0};
    int fd = nd_open_regular(path, &err);
    if (fd < 0) return cli_fail("inspect", err.message);
    close(fd);
    nd_file_kind k = nd_file_kind_of_path(path);
    if (k == ND_KIND_CACT) return inspect_cact(path);
    if (k > ND_KIND_EMPTY && k != ND_KIND_SAFETENSORS) {
        char msg[4400];
        snprintf(msg, sizeof msg, "%s: is %s, not a .cact or .safetensors model", path, nd_file_kind_phrase(k));
        return cli_fail("inspect", msg);
    }
    return inspect_safetensors(path);
}
