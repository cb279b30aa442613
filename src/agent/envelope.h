/* envelope.h - the JSON object returned for every turn (SPEC section 10).
 *
 *   {"type":"call"|"respond","success":bool,"error":null|str,"error_code":null|int,
 *    "function_calls":[{"name","arguments"}],"reasoning":str,"confidence":number|null,
 *    "prefill_tps":number,"decode_tps":number,"peak_ram_mb":number,
 *    "validation":{"ungrounded":["tool.path",...],"negation":bool,"out_of_schema":["tool.key"],
 *                  "missing":["tool.key"],"unused_numbers":[str],"completed":["tool.key"],"split":[str,str],
 *                  "asked_again":bool,"leaned":bool},
 *    "suppressed_calls":[...]}
 *
 * type is "call" when function_calls is non-empty and "respond" when it is
 * empty (the model's "nothing to call", or a failed turn).  The writer never
 * produces invalid JSON: the reasoning bytes are made valid UTF-8 (invalid
 * sequences become U+FFFD) and the calls are re-parsed and re-written, so a
 * malformed calls text turns into success:false instead of broken output. */
#ifndef ND_ENVELOPE_H
#define ND_ENVELOPE_H

#include <stddef.h>

#include "core/buf.h"

typedef struct nd_envelope {
    int success;
    const char *error;     /* NULL when success */
    int error_code;        /* 0 when success, else a NEEDLE_E* code */
    const char *calls;     /* the generated call array text ("[...]"); NULL: none */
    size_t calls_len;
    const char *reasoning; /* raw bytes of the <think> text (may be mid-character) */
    size_t reasoning_len;
    double confidence;     /* NaN: null */
    /* Needle 3 router head: 3 raw logits and the file's calibration row,
     * written as "router":{"logits":[..],"calibration":[..]} when has_router */
    int has_router;
    double router_logits[3], router_calibration[3];
    double prefill_tps, decode_tps, peak_ram_mb;
    /* grounding checks (agent/grounding.h): "validation":{"ungrounded":[...],"negation":bool}
     * and "suppressed_calls" (the calls a strict session withheld); NULL texts write [] */
    const char *ungrounded;       /* a JSON array of "tool.path" strings */
    int negation;
    const char *out_of_schema;     /* a JSON array of "tool.key" strings (agent/range_guard.h) */
    const char *missing;           /* a JSON array of "tool.key": required values filled with a placeholder */
    const char *unused_numbers;    /* a JSON array of the numbers said that no call uses (agent/unused_number.h) */
    const char *completed;         /* a JSON array of "tool.key": values taken from the request (docs/envelope.md) */
    const char *split;             /* a JSON array of the two parts a request was answered in (agent/split_turn.h) */
    int asked_again;               /* the calls are the answer to the request asked again (agent/ask_again.h) */
    int leaned;                    /* the calls are the answer the model nearly gave (agent/lean_call.h) */
    const char *suppressed_calls; /* a JSON array of calls */
} nd_envelope;

/* Append the envelope as one line of compact JSON (no newline) to out. */
void nd_envelope_write(nd_buf *out, const nd_envelope *e);

/* Peak resident memory of this process in MiB (getrusage). */
double nd_peak_ram_mb(void);

#endif
