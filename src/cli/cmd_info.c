/* cmd_info.c - `needle info`: backends built in (each usable or why not), the
 * one chosen and why, thread count, CPU features (what the machine has, what
 * this build uses).  Backends are listed from the registry: no backend is
 * named here. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/cpu_features.h"
#include "core/threadpool.h"

static void print_features(const char *key, const nd_cpu_features *f)
{
    const struct {
        const char *name;
        int on;
    } v[] = {{"avx2", f->avx2},         {"fma", f->fma},           {"f16c", f->f16c},
             {"avx512f", f->avx512f},   {"avx512bw", f->avx512bw}, {"avx512vl", f->avx512vl},
             {"avx512dq", f->avx512dq}, {"avx512vnni", f->avx512vnni}, {"neon", f->neon},
             {"neon_dotprod", f->neon_dotprod}};
    printf("\"%s\":{", key);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) printf("%s\"%s\":%s", i ? "," : "", v[i].name, v[i].on ? "true" : "false");
    printf("}");
}

/* a JSON string: escape quotes, backslashes, controls */
static void print_json_string(const char *s)
{
    putchar('"');
    for (const char *c = s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
        else putchar(*c);
    }
    putchar('"');
}

int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: needle info\nPrints backends, the selected one and why (NEEDLE_BACKEND overrides),\n"
                   "threads (NEEDLE_THREADS overrides), CPU features and the kernel path\n"
                   "(NEEDLE_ISA=avx512|avx2|portable|neon forces one), as JSON.\n");
            return 0;
        }
        fprintf(stderr, "usage: needle info\n");
        return 2;
    }
    const nd_backend_entry *chosen = NULL;
    const char *why = NULL;
    needle_error err = {0};
    int rc = nd_backend_select(NULL, &chosen, &why, &err);
    printf("{\"version\":\"%s\",\"backends\":[", NEEDLE_VERSION);
    for (int i = 0; i < nd_backend_count(); i++) {
        const nd_backend_entry *e = nd_backend_at(i);
        const char *no = NULL;
        int usable = nd_backend_usable(e, &no);
        char detail[256];
        if (usable && e->describe) e->describe(detail, sizeof detail);
        else snprintf(detail, sizeof detail, "%s", usable ? e->description : no);
        printf("%s{\"name\":\"%s\",\"description\":\"%s\",\"usable\":%s,\"detail\":", i ? "," : "", e->name,
               e->description, usable ? "true" : "false");
        print_json_string(detail);
        printf("}");
    }
    printf("],");
    if (rc == 0) printf("\"backend\":\"%s\",\"backend_reason\":\"%s\",", chosen->name, why);
    else printf("\"backend\":null,\"backend_error\":\"%s\",", err.message);
    printf("\"threads\":%d,\"cpu_count\":%d,", nd_threads_default(), nd_cpu_count());
    nd_cpu_features det, comp;
    nd_cpu_features_detect(&det);
    nd_cpu_features_compiled(&comp);
    print_features("cpu_features", &det);
    printf(",");
    print_features("compiled_baseline", &comp);
    /* the kernel paths: built in, runnable here, the one chosen and why */
    printf(",\"kernel_paths\":[");
    int first = 1;
    for (int i = ND_ISA_COUNT - 1; i >= 0; i--) {
        if (!nd_cpu_isa_built((nd_cpu_isa)i)) continue;
        const char *missing = NULL;
        int ok = nd_cpu_isa_supported(&det, (nd_cpu_isa)i, &missing);
        printf("%s{\"name\":\"%s\",\"runs_here\":%s", first ? "" : ",", nd_cpu_isa_name((nd_cpu_isa)i),
               ok ? "true" : "false");
        if (!ok) printf(",\"missing\":\"%s\"", missing);
        printf("}");
        first = 0;
    }
    nd_cpu_isa isa;
    const char *isa_why = NULL;
    int isa_rc = nd_cpu_isa_choose(&isa, &isa_why);
    printf("],\"kernel_path\":");
    if (isa_rc == 0) printf("\"%s\"", nd_cpu_isa_name(isa));
    else printf("null");
    printf(",\"kernel_path_reason\":");
    print_json_string(isa_why);
    printf("}\n");
    return rc == 0 ? 0 : 1;
}
