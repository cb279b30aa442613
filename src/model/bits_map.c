/* bits_map.c - parsing the bits map and longest-prefix lookup. */
#include "model/bits_map.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/params.h"
#include "model/weights.h"

int nd_bits_parse_width(const char *s, int len)
{
    if (len == 1 && s[0] >= '2' && s[0] <= '4') return s[0] - '0';
    if (len == 4 && !strncmp(s, "1.58", 4)) return ND_CQ_TERNARY;
    return -1;
}

/* Is `key` a prefix of the name pattern `pat` (a CQ matrix's .cact name in
 * model/params.def; "%d" there stands for a site number: any digits)? */
static int key_matches(const char *key, const char *pat)
{
    const char *hole = strstr(pat, "%d");
    size_t n = strlen(key);
    if (!hole) return strncmp(pat, key, n) == 0;
    size_t pre = (size_t)(hole - pat);
    if (n <= pre) return strncmp(pat, key, n) == 0;
    if (strncmp(pat, key, pre) != 0) return 0;
    const char *p = key + pre;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    return strncmp(hole + 2, p, strlen(p)) == 0;
}

/* Is `key` a prefix of some canonical name?  Catches typos such as
 * "attn.qproj" that would otherwise silently fall back to the default. */
static int key_is_known(const char *key)
{
    for (int i = 0; i < ND_P_COUNT; i++) {
        const nd_param_desc *p = &nd_params[i];
        if (!p->cq) continue;
        if (p->scope != ND_SCOPE_HEAD && key_matches(key, p->cact_name)) return 1;
        /* Needle 3 head matrices: heads.{embedding,confidence,router}.{probes,query,proj} */
        for (int h = 0; p->scope == ND_SCOPE_HEAD && h < ND_NUM_HEAD_KINDS; h++) {
            char name[64];
            snprintf(name, sizeof name, "heads.");
            snprintf(name + 6, sizeof name - 6, p->cact_name, nd_param_heads[h].name3);
            if (!strncmp(name, key, strlen(key))) return 1;
        }
    }
    return 0;
}

int nd_bits_map_parse(const char *spec, nd_bits_map *m, needle_error *err)
{
    memset(m, 0, sizeof *m);
    m->default_bits = -1;
    const char *p = spec;
    int entry = 0;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        entry++;
        /* tolerate spaces around keys and values: "default = 4, embedding=3" */
        const char *k0 = p, *k1 = eq ? eq : end;
        while (k0 < k1 && *k0 == ' ') k0++;
        while (k1 > k0 && k1[-1] == ' ') k1--;
        if (!eq || k1 == k0)
            return nd_errorf(err, NEEDLE_EINVAL, "bits map: entry %d '%.*s' is not KEY=WIDTH", entry, (int)(end - p), p);
        const char *v0 = eq + 1, *v1 = end;
        while (v0 < v1 && *v0 == ' ') v0++;
        while (v1 > v0 && v1[-1] == ' ') v1--;
        int bits = nd_bits_parse_width(v0, (int)(v1 - v0));
        if (bits < 0)
            return nd_errorf(err, NEEDLE_EINVAL, "bits map: entry %d '%.*s': width must be 2, 3, 4 or 1.58", entry,
                             (int)(end - p), p);
        size_t klen = (size_t)(k1 - k0);
        if (klen >= ND_BITS_MAP_KEY)
            return nd_errorf(err, NEEDLE_EINVAL, "bits map: entry %d: key too long", entry);
        char key[ND_BITS_MAP_KEY];
        memcpy(key, k0, klen);
        key[klen] = '\0';
        if (!strcmp(key, "default")) {
            if (m->default_bits >= 0) return nd_errorf(err, NEEDLE_EINVAL, "bits map: entry %d: default given twice", entry);
            m->default_bits = bits;
        } else {
            if (!key_is_known(key))
                return nd_errorf(err, NEEDLE_EINVAL,
                                 "bits map: entry %d: unknown key '%s' (expected a prefix of embedding, attn.q_proj, "
                                 "mhc_phi_pre, engram0.tables, ...)",
                                 entry, key);
            for (int i = 0; i < m->count; i++)
                if (!strcmp(m->entries[i].key, key))
                    return nd_errorf(err, NEEDLE_EINVAL, "bits map: entry %d: key '%s' given twice", entry, key);
            if (m->count == ND_BITS_MAP_MAX)
                return nd_errorf(err, NEEDLE_EINVAL, "bits map: more than %d entries", ND_BITS_MAP_MAX);
            memcpy(m->entries[m->count].key, key, klen + 1);
            m->entries[m->count].bits = bits;
            m->count++;
        }
        p = *end ? end + 1 : end;
        if (*end && !*p) return nd_errorf(err, NEEDLE_EINVAL, "bits map: trailing ','");
    }
    if (m->default_bits < 0) return nd_errorf(err, NEEDLE_EINVAL, "bits map: 'default=WIDTH' is required");
    return 0;
}

int nd_bits_map_lookup(const nd_bits_map *m, const char *canonical)
{
    return nd_bits_map_lookup_or(m, canonical, m->default_bits);
}

int nd_bits_map_lookup_or(const nd_bits_map *m, const char *canonical, int fallback)
{
    int best = fallback;
    size_t best_len = 0;
    for (int i = 0; i < m->count; i++) {
        size_t n = strlen(m->entries[i].key);
        if (n > best_len && !strncmp(canonical, m->entries[i].key, n)) {
            best = m->entries[i].bits;
            best_len = n;
        }
    }
    return best;
}
