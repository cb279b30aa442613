/* test_number.c - the strict number parser every CLI option and stored option
 * line goes through: whole string, range, NaN/Inf, overflow, trailing junk,
 * and a message that names the option and the allowed range. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/number.h"

static void test_integers(void)
{
    needle_error e = {0};
    int v = -1;
    CHECK(nd_parse_int("42", 1, 100, "--epochs", &v, &e) == 0 && v == 42);
    CHECK(nd_parse_int("-7", -10, 10, "--x", &v, &e) == 0 && v == -7);
    const char *bad[] = {"", " 4", "4 ", "4x", "0x10", "nan", "1e3", "3.0", "+", "-", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 123;
        CHECKF(nd_parse_int(bad[i], 0, 1000000, "--epochs", &v, &e) == NEEDLE_EINVAL && v == 123, "'%s' accepted", bad[i]);
        CHECKF(strstr(e.message, "--epochs") != NULL, "message: %s", e.message);
    }
    CHECK(nd_parse_int("99999999999", 1, 1000000, "--epochs", &v, &e) == NEEDLE_EINVAL);
    CHECKF(!strcmp(e.message, "--epochs: '99999999999' is out of range (allowed 1 .. 1000000)"), "%s", e.message);
    CHECK(nd_parse_int("4x", 1, 9, "--threads", &v, &e) == NEEDLE_EINVAL);
    CHECKF(!strcmp(e.message, "--threads: '4x' is not an integer (trailing 'x')"), "%s", e.message);
}

static void test_unsigned(void)
{
    needle_error e = {0};
    uint64_t u = 0;
    CHECK(nd_parse_u64("18446744073709551615", "--seed", &u, &e) == 0 && u == UINT64_MAX);
    CHECK(nd_parse_u64("18446744073709551616", "--seed", &u, &e) == NEEDLE_EINVAL);
    CHECK(nd_parse_u64("-1", "--seed", &u, &e) == NEEDLE_EINVAL && strstr(e.message, "negative"));
}

static void test_floats(void)
{
    needle_error e = {0};
    double d = 0;
    CHECK(nd_parse_double("1e-4", 1e-12, 10, "--lr", &d, &e) == 0 && d == 1e-4);
    CHECK(nd_parse_double(".5", 0, 1, "--top-p", &d, &e) == 0 && d == 0.5);
    const char *bad[] = {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "0.1x", "", " 1", "0x1p3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = 7;
        CHECKF(nd_parse_double(bad[i], -1e300, 1e300, "--lr", &d, &e) == NEEDLE_EINVAL && d == 7, "'%s' accepted",
               bad[i]);
    }
    CHECK(nd_parse_double("1.5", 0, 0.99, "--val-split", &d, &e) == NEEDLE_EINVAL);
    CHECKF(strstr(e.message, "--val-split") && strstr(e.message, "allowed 0 .. 0.99"), "%s", e.message);
    float f = 0;
    CHECK(nd_parse_float("0.25", 0, 1, "--top-p", &f, &e) == 0 && f == 0.25f);
}

int main(void)
{
    RUN(test_integers);
    RUN(test_unsigned);
    RUN(test_floats);
    return check_summary();
}
