/* test_repeat_guard.c - the decode loop guard fires on real cycles only. */
#include <string.h>

#include "agent/repeat_guard.h"
#include "check.h"

/* n copies of a k-token cycle (ids base, base+1, ...), after a non-repeating prefix */
static int cycle(int32_t *ids, int prefix, int k, int reps)
{
    int n = 0;
    for (int i = 0; i < prefix; i++) ids[n++] = 1000 + i;
    for (int r = 0; r < reps; r++)
        for (int j = 0; j < k; j++) ids[n++] = 10 + j;
    return n;
}

static void test_thresholds_per_cycle_length(void)
{
    int32_t ids[4 * ND_REPEAT_MAX_CYCLE + 64];
    int n;
    n = cycle(ids, 5, 1, 7);
    CHECK(nd_repeat_next(ids, n) == -1); /* "5555555": a value, not a loop */
    n = cycle(ids, 5, 1, 8);
    CHECK(nd_repeat_next(ids, n) == 10);
    n = cycle(ids, 5, 2, 3);
    CHECK(nd_repeat_next(ids, n) == -1);
    n = cycle(ids, 5, 2, 4);
    CHECK(nd_repeat_next(ids, n) == 10); /* a b a b a b a b -> next would be a */
    n = cycle(ids, 5, 3, 2);
    CHECK(nd_repeat_next(ids, n) == -1);
    n = cycle(ids, 5, 3, 3);
    CHECK(nd_repeat_next(ids, n) == 10);
    n = cycle(ids, 0, ND_REPEAT_MAX_CYCLE, 3);
    CHECK(n == ND_REPEAT_HISTORY);
    CHECK(nd_repeat_next(ids, n) == 10);
    n = cycle(ids, 0, ND_REPEAT_MAX_CYCLE + 1, 3);
    CHECK(nd_repeat_next(ids + n - ND_REPEAT_HISTORY, ND_REPEAT_HISTORY) == -1); /* longer cycles are not looked for */
}

static void test_partial_cycle_and_short_history(void)
{
    int32_t ids[16] = {7, 8, 9, 7, 8, 9, 7, 8}; /* 2 2/3 repeats of 3, ends mid-cycle */
    CHECK(nd_repeat_next(ids, 8) == -1);
    ids[8] = 9; /* now 3 whole repeats */
    CHECK(nd_repeat_next(ids, 9) == 7);
    CHECK(nd_repeat_next(ids, 0) == -1);
    CHECK(nd_repeat_next(ids, 1) == -1);
    int32_t words[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* no repeat at all */
    CHECK(nd_repeat_next(words, 12) == -1);
}

int main(void)
{
    RUN(test_thresholds_per_cycle_length);
    RUN(test_partial_cycle_and_short_history);
    return check_summary();
}
