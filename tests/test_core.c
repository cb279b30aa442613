/* test_core.c - error records, fp16 conversion, buffers, atomic files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/file.h"
#include "core/fp16.h"

static void test_half_round_trip(void)
{
    /* every finite half survives half -> float -> half exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        uint16_t back = nd_float_to_half(nd_half_to_float((uint16_t)h));
        CHECKF(back == h, "h=%04x back=%04x", h, back);
    }
}

static void test_half_rounding(void)
{
    CHECK(nd_float_to_half(1.0f) == 0x3c00);
    CHECK(nd_float_to_half(65504.0f) == 0x7bff);
    CHECK(nd_float_to_half(65520.0f) == 0x7c00); /* rounds up to inf */
    /* 1 + 2^-11 is exactly between 1 and 1+2^-10: ties to even -> 1 */
    CHECK(nd_float_to_half(1.0f + 1.0f / 2048) == 0x3c00);
    CHECK(nd_float_to_half(1.0f + 3.0f / 2048) == 0x3c02);
    CHECK(nd_float_to_half(5.9604645e-08f) == 0x0001); /* smallest subnormal */
    CHECK(nd_float_to_half(2.9802322e-08f) == 0x0000); /* half of it: tie to even -> 0 */
    CHECK(nd_float_to_half(-2.0f) == 0xc000);
    CHECK(fabsf(nd_half_to_float(0x3555) - 0.33325195f) < 1e-7f);
}

static void test_buf(void)
{
    nd_buf b;
    nd_buf_init(&b);
    for (int i = 0; i < 1000; i++) nd_buf_printf(&b, "%d,", i);
    CHECK(!b.oom);
    CHECK(strncmp(b.data, "0,1,2,", 6) == 0);
    CHECK(b.len == strlen(b.data));
    char *s = nd_buf_take(&b);
    CHECK(b.data == NULL);
    free(s);
}

static void test_atomic_write(void)
{
    char path[] = "/tmp/needle_test_atomicXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "old", 3) == 3);
    close(fd);
    needle_error err;
    nd_atomic_file af;
    CHECK(nd_atomic_open(&af, path, &err) == 0);
    fputs("new contents", af.fp);
    /* until commit the old file is intact */
    char *text = NULL;
    size_t len = 0;
    CHECK(nd_read_file(path, &text, &len, &err) == 0 && len == 3);
    free(text);
    CHECK(nd_atomic_commit(&af, &err) == 0);
    CHECK(nd_read_file(path, &text, &len, &err) == 0 && strcmp(text, "new contents") == 0);
    free(text);
    CHECK(nd_atomic_open(&af, path, &err) == 0);
    fputs("abandoned", af.fp);
    nd_atomic_abort(&af);
    CHECK(access(af.tmp_path, F_OK) != 0);
    CHECK(nd_read_file(path, &text, &len, &err) == 0 && strcmp(text, "new contents") == 0);
    free(text);
    unlink(path);
}

static void test_errors(void)
{
    needle_error err;
    CHECK(nd_errorf(&err, NEEDLE_EFORMAT, "%s: bad tag at byte %d", "x.cact", 0) == NEEDLE_EFORMAT);
    CHECK(strcmp(err.message, "x.cact: bad tag at byte 0") == 0);
    CHECK(strcmp(needle_strerror(NEEDLE_EJSON), "NEEDLE_EJSON") == 0);
    nd_mapping m;
    CHECK(nd_map_file("/nonexistent/file", &m, &err) == NEEDLE_EIO);
    CHECK(strstr(err.message, "/nonexistent/file") != NULL);
}

int main(void)
{
    RUN(test_half_round_trip);
    RUN(test_half_rounding);
    RUN(test_buf);
    RUN(test_atomic_write);
    RUN(test_errors);
    return check_summary();
}
