/* repeat_guard.c - cycle detection on the tail of the generated ids (see repeat_guard.h). */
#include "agent/repeat_guard.h"

static int repeats_needed(int k) { return k == 1 ? 8 : k == 2 ? 4 : 3; }

int nd_repeat_next(const int32_t *ids, int n)
{
    for (int k = 1; k <= ND_REPEAT_MAX_CYCLE; k++) {
        int span = k * repeats_needed(k);
        if (span > n) continue;
        const int32_t *tail = ids + n - span;
        int cyclic = 1;
        for (int i = k; i < span && cyclic; i++) cyclic = tail[i] == tail[i - k];
        if (cyclic) return ids[n - k]; /* the cycle's next token */
    }
    return -1;
}
