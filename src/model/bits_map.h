/* bits_map.h - per-tensor CQ widths: "default=4,embedding=3,attn.v_proj=2".
 *
 * Keys name tensors by their canonical names (SPEC section 8): embedding,
 * attn.{q,k,v,gate,out}_proj, mhc_phi_{pre,post,res},
 * engramS.{tables,key_proj,value_proj} (S = engram site index).  A key
 * applies to every canonical name it is a prefix of ("attn" = all five
 * projections, "engram1" = all of site 1); the longest matching key wins,
 * otherwise `default`, which is required.  Widths: 2, 3, 4 or 1.58 (ternary).
 */
#ifndef ND_BITS_MAP_H
#define ND_BITS_MAP_H

#include "needle.h"

#define ND_BITS_MAP_MAX 32
#define ND_BITS_MAP_KEY 48

typedef struct nd_bits_map {
    int default_bits;
    int count;
    struct {
        char key[ND_BITS_MAP_KEY];
        int bits; /* 2, 3, 4 or ND_CQ_TERNARY */
    } entries[ND_BITS_MAP_MAX];
} nd_bits_map;

/* Parse a width: "2", "3", "4", "1.58" -> 2, 3, 4, ND_CQ_TERNARY; else -1. */
int nd_bits_parse_width(const char *s, int len);

/* Parse a map.  Errors (NEEDLE_EINVAL) name the entry: missing default,
 * unknown key, bad width, duplicate key. */
int nd_bits_map_parse(const char *spec, nd_bits_map *m, needle_error *err);

/* The width for a canonical tensor name. */
int nd_bits_map_lookup(const nd_bits_map *m, const char *canonical);
/* The width a key of the map gives the name, or `fallback` when no key
 * matches it (Needle 3 head matrices: 4 bits unless named, as the reference
 * exports them whatever the model's width). */
int nd_bits_map_lookup_or(const nd_bits_map *m, const char *canonical, int fallback);

#endif
