/* token_mask.h - which vocabulary tokens the grammar allows next.
 *
 * The vocabulary's decoded byte strings are put in a byte trie once.  A mask is
 * computed by walking the trie depth-first from the current grammar state,
 * advancing a copy of the state by each edge's byte: tokens that share a
 * prefix share the work, and a refused byte prunes its whole subtree.
 *
 * The trie knows nothing of the tokenizer: callers pass (id, bytes, len) for
 * each ordinary token (markers and control tokens excluded; the agent adds
 * `</tool_call>` itself when nd_grammar_complete says the call list is done).
 */
#ifndef ND_TOKEN_MASK_H
#define ND_TOKEN_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "needle.h"

typedef struct nd_token_trie nd_token_trie;

/* Build from n tokens: ids[i] in [0, vocab_size), bytes[i][0..lens[i]).  Tokens
 * with no bytes are ignored (never allowed).  Several ids may share bytes. */
int nd_token_trie_build(const int *ids, const char *const *bytes, const size_t *lens, size_t n, int vocab_size,
                        nd_token_trie **out, needle_error *err);
void nd_token_trie_free(nd_token_trie *t);
int nd_token_trie_vocab_size(const nd_token_trie *t);
size_t nd_token_trie_node_count(const nd_token_trie *t);

/* Words in a mask: (vocab_size + 31) / 32. */
size_t nd_token_mask_words(const nd_token_trie *t);

/* bitmask[id/32] bit id%32 is set for every token whose whole byte string the
 * grammar accepts from state s; other bits are cleared.  Returns the number of
 * allowed tokens, or NEEDLE_ENOMEM. */
int nd_token_mask(const nd_grammar *g, const nd_grammar_state *s, const nd_token_trie *trie, uint32_t *bitmask);

/* A cache of masks by exact grammar state, for one (grammar, trie) pair: states
 * recur (the start of every call, positions inside enums, free strings).  A
 * new copy source on the grammar (nd_grammar_set_copy_source) empties it at
 * the next get, since the same state bytes then mean another position. */
typedef struct nd_mask_cache nd_mask_cache;
int nd_mask_cache_new(const nd_grammar *g, const nd_token_trie *trie, int capacity, nd_mask_cache **out,
                      needle_error *err);
void nd_mask_cache_free(nd_mask_cache *c);
/* The mask for s (computed on a miss).  The pointer stays valid until the next
 * call on this cache.  NULL only when out of memory. */
const uint32_t *nd_mask_cache_get(nd_mask_cache *c, const nd_grammar_state *s);
void nd_mask_cache_stats(const nd_mask_cache *c, uint64_t *hits, uint64_t *misses);

#endif
