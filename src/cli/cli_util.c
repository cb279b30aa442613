/* cli_util.c - argument helpers shared by the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *cli_flag_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) return NULL;
    (*i)++;
    return argv[*i];
}

int cli_parse_int_list(const char *s, int **out)
{
    int cap = 16, n = 0;
    int *v = malloc(sizeof(int) * (size_t)cap);
    if (!v) return -1;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < -2147483647L || x > 2147483647L) { free(v); return -1; }
        if (n == cap) {
            int *nv = realloc(v, sizeof(int) * (size_t)(cap *= 2));
            if (!nv) { free(v); return -1; }
            v = nv;
        }
        v[n++] = (int)x;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p) { free(v); return -1; }
    }
    *out = v;
    return n;
}

int cli_fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "needle %s: %s\n", cmd, msg);
    return 1;
}
