/* envelope.c - writing the per-turn JSON envelope. */
#include "agent/envelope.h"

#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "core/json.h"
#include "core/utf8.h"
#include "needle.h"

/* JSON has no NaN/Infinity: non-finite measurements are written as 0. */
static void put_number(nd_buf *out, double v)
{
    if (!isfinite(v)) v = 0.0;
    nd_buf_printf(out, "%.6g", v);
}

/* A JSON array given as text, re-parsed so the envelope stays valid JSON whatever it holds. */
static void write_json_array(nd_buf *out, const char *text)
{
    nd_json *j = NULL;
    needle_error perr;
    if (text && nd_json_parse(text, strlen(text), NULL, &j, &perr) == 0 && j->type == ND_JSON_ARRAY)
        nd_json_write(out, j, 0);
    else nd_buf_puts(out, "[]");
    nd_json_free(j);
}

void nd_envelope_write(nd_buf *out, const nd_envelope *e)
{
    nd_json *calls = NULL;
    int success = e->success;
    const char *error = e->error;
    int code = e->error_code;
    if (e->calls) {
        needle_error perr;
        if (nd_json_parse(e->calls, e->calls_len, NULL, &calls, &perr) != 0 || calls->type != ND_JSON_ARRAY) {
            /* the grammar should make this impossible; never pass it on */
            nd_json_free(calls);
            calls = NULL;
            success = 0;
            error = "the generated call list is not a JSON array";
            code = NEEDLE_EFORMAT;
        }
    }
    int n_calls = calls ? (int)calls->count : 0;
    nd_buf_puts(out, n_calls > 0 ? "{\"type\":\"call\"" : "{\"type\":\"respond\"");
    nd_buf_puts(out, success ? ",\"success\":true" : ",\"success\":false");
    nd_buf_puts(out, ",\"error\":");
    if (success || !error) nd_buf_puts(out, success ? "null" : "\"unknown error\"");
    else {
        nd_buf tmp;
        nd_buf_init(&tmp);
        nd_utf8_append_repaired(&tmp, error, strlen(error));
        nd_json_write_string(out, tmp.data ? tmp.data : "", tmp.len, 0);
        nd_buf_free(&tmp);
    }
    if (success) nd_buf_puts(out, ",\"error_code\":null");
    else nd_buf_printf(out, ",\"error_code\":%d", code ? code : NEEDLE_EINVAL);
    nd_buf_puts(out, ",\"function_calls\":");
    if (calls) nd_json_write(out, calls, 0);
    else nd_buf_puts(out, "[]");
    nd_buf_puts(out, ",\"reasoning\":");
    nd_buf r;
    nd_buf_init(&r);
    nd_utf8_append_repaired(&r, e->reasoning ? e->reasoning : "", e->reasoning ? e->reasoning_len : 0);
    nd_json_write_string(out, r.data ? r.data : "", r.len, 0);
    nd_buf_free(&r);
    nd_buf_puts(out, ",\"confidence\":");
    if (isnan(e->confidence) || !isfinite(e->confidence)) nd_buf_puts(out, "null");
    else put_number(out, e->confidence < 0 ? 0 : e->confidence > 1 ? 1 : e->confidence);
    if (e->has_router) {
        nd_buf_puts(out, ",\"router\":{\"logits\":[");
        for (int i = 0; i < 3; i++) {
            if (i) nd_buf_putc(out, ',');
            put_number(out, isfinite(e->router_logits[i]) ? e->router_logits[i] : 0.0);
        }
        nd_buf_puts(out, "],\"calibration\":[");
        for (int i = 0; i < 3; i++) {
            if (i) nd_buf_putc(out, ',');
            put_number(out, isfinite(e->router_calibration[i]) ? e->router_calibration[i] : 0.0);
        }
        nd_buf_puts(out, "]}");
    }
    nd_buf_puts(out, ",\"prefill_tps\":");
    put_number(out, e->prefill_tps);
    nd_buf_puts(out, ",\"decode_tps\":");
    put_number(out, e->decode_tps);
    nd_buf_puts(out, ",\"peak_ram_mb\":");
    put_number(out, e->peak_ram_mb);
    nd_buf_puts(out, ",\"validation\":{\"ungrounded\":");
    write_json_array(out, e->ungrounded);
    nd_buf_puts(out, e->negation ? ",\"negation\":true" : ",\"negation\":false");
    nd_buf_puts(out, ",\"out_of_schema\":");
    write_json_array(out, e->out_of_schema);
    nd_buf_puts(out, ",\"missing\":");
    write_json_array(out, e->missing);
    nd_buf_puts(out, ",\"unused_numbers\":");
    write_json_array(out, e->unused_numbers);
    nd_buf_puts(out, ",\"completed\":");
    write_json_array(out, e->completed);
    nd_buf_puts(out, ",\"split\":");
    write_json_array(out, e->split);
    nd_buf_puts(out, e->asked_again ? ",\"asked_again\":true" : ",\"asked_again\":false");
    nd_buf_puts(out, e->leaned ? ",\"leaned\":true" : ",\"leaned\":false");
    nd_buf_putc(out, '}');
    nd_buf_puts(out, ",\"suppressed_calls\":");
    write_json_array(out, e->suppressed_calls);
    nd_buf_putc(out, '}');
    nd_json_free(calls);
}

double nd_peak_ram_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}
