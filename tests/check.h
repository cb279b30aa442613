/* check.h - the tiny test harness every C test uses.
 *
 *   static void test_something(void) { CHECK(x == 1); CHECKF(d < 1e-4, "d=%g", d); }
 *   int main(void) { RUN(test_something); return check_summary(); }
 *
 * A test passes when none of its CHECKs failed.  check_summary prints
 * "N passed, N failed" (counted in tests) and returns the exit status.
 */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>

static int check_tests_passed, check_tests_failed, check_current_failed;

#define CHECK(cond) CHECKF(cond, "%s", "")
#define CHECKF(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            if (check_current_failed < 20) {                                       \
                fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
                fprintf(stderr, __VA_ARGS__);                                      \
                fprintf(stderr, "\n");                                             \
            }                                                                      \
            check_current_failed++;                                                \
        }                                                                          \
    } while (0)

#define RUN(fn)                                                                    \
    do {                                                                           \
        check_current_failed = 0;                                                  \
        fn();                                                                      \
        if (check_current_failed) {                                                \
            check_tests_failed++;                                                  \
            printf("not ok  %s (%d failed checks)\n", #fn, check_current_failed);  \
        } else {                                                                   \
            check_tests_passed++;                                                  \
            printf("ok      %s\n", #fn);                                           \
        }                                                                          \
        fflush(stdout);                                                            \
    } while (0)

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_tests_passed, check_tests_failed);
    return check_tests_failed ? 1 : 0;
}

#endif
