/* number.c - strict number parsing with messages that name the option. */
#include "core/number.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* What is wrong with the text itself, or NULL when it is plausibly a number.
 * strtol/strtod skip leading blanks and accept "nan", "inf", hex: refuse all. */
static const char *shape_problem(const char *s, int allow_float)
{
    if (!s || !*s) return "is empty";
    if (isspace((unsigned char)s[0])) return "starts with a blank";
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p) && !(allow_float && *p == '.' && isdigit((unsigned char)p[1])))
        return allow_float ? "is not a number" : "is not an integer";
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) return allow_float ? "is not a decimal number" : "is not a decimal integer";
    return NULL;
}

static int fail(needle_error *err, const char *name, const char *s, const char *why)
{
    return nd_errorf(err, NEEDLE_EINVAL, "%s: '%.64s' %s", name ? name : "value", s ? s : "", why);
}

int nd_parse_i64(const char *s, int64_t lo, int64_t hi, const char *name, int64_t *out, needle_error *err)
{
    char why[160];
    const char *bad = shape_problem(s, 0);
    if (bad) return fail(err, name, s, bad);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end) {
        snprintf(why, sizeof why, "is not an integer (trailing '%.16s')", end);
        return fail(err, name, s, why);
    }
    if (errno == ERANGE || v < lo || v > hi) {
        snprintf(why, sizeof why, "is out of range (allowed %lld .. %lld)", (long long)lo, (long long)hi);
        return fail(err, name, s, why);
    }
    *out = v;
    return 0;
}

int nd_parse_int(const char *s, int lo, int hi, const char *name, int *out, needle_error *err)
{
    int64_t v;
    int rc = nd_parse_i64(s, lo, hi, name, &v, err);
    if (!rc) *out = (int)v;
    return rc;
}

int nd_parse_u64(const char *s, const char *name, uint64_t *out, needle_error *err)
{
    const char *bad = shape_problem(s, 0);
    if (bad) return fail(err, name, s, bad);
    if (s[0] == '-') return fail(err, name, s, "is negative (allowed 0 .. 18446744073709551615)");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return fail(err, name, s, "is not an integer (trailing characters)");
    if (errno == ERANGE) return fail(err, name, s, "is out of range (allowed 0 .. 18446744073709551615)");
    *out = (uint64_t)v;
    return 0;
}

int nd_parse_double(const char *s, double lo, double hi, const char *name, double *out, needle_error *err)
{
    char why[160];
    const char *bad = shape_problem(s, 1);
    if (bad) return fail(err, name, s, bad);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end) {
        snprintf(why, sizeof why, "is not a number (trailing '%.16s')", end);
        return fail(err, name, s, why);
    }
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0) || v < lo || v > hi) {
        snprintf(why, sizeof why, "is out of range (allowed %g .. %g)", lo, hi);
        return fail(err, name, s, why);
    }
    *out = v;
    return 0;
}

int nd_parse_float(const char *s, float lo, float hi, const char *name, float *out, needle_error *err)
{
    double v;
    int rc = nd_parse_double(s, lo, hi, name, &v, err);
    if (!rc) *out = (float)v;
    return rc;
}
