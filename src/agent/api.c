/* api.c - the public C API (include/needle.h): model and session handles, and
 * the released engine's four-call compatibility layer over one hidden session.
 *
 * Nothing here is global except the compatibility layer's default model and
 * session, which a mutex guards (the released interface has no handles). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/session.h"
#include "core/error.h"
#include "model/cact/cact.h"
#include "text/chat.h"
#include "io/spm_model.h"
#include "model/params.h"
#include "needle.h"

/* ------------------------------------------------------------------ models */

static void model_options(const needle_model_options *opt, nd_model_options *mo)
{
    memset(mo, 0, sizeof *mo);
    if (!opt) return;
    mo->threads = opt->threads;
    mo->backend = opt->backend;
    mo->layers = opt->layers;
    mo->acts = opt->acts;
}

/* The tokenizer: a .model file when given, else the blob inside the .cact. */
static int open_tokenizer(needle_model *m, const char *tokenizer_path, const char *where, needle_error *err)
{
    if (tokenizer_path) return nd_tokenizer_load_spm(tokenizer_path, &m->tok, err);
    const nd_weights *w = &m->net->weights;
    if (!w->tokenizer_blob || w->tokenizer_blob_size == 0)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: no tokenizer inside this file: pass a SentencePiece .model", where);
    nd_vocab v;
    memset(&v, 0, sizeof v);
    int rc = nd_vocab_from_blob(w->tokenizer_blob, w->tokenizer_blob_size, where, &v, err);
    if (!rc) rc = nd_tokenizer_create(&v, &m->tok, err);
    nd_vocab_free(&v);
    return rc;
}

static int finish_open(needle_model *m, const needle_model_options *opt, const char *tokenizer_path,
                       const char *where, needle_error *err)
{
    if (opt && opt->kv_window < 0)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: kv_window %d must be >= 0", where, opt->kv_window);
    int max_seq = m->net->weights.cfg.max_seq_len;
    if (opt && opt->kv_window > max_seq)
        return nd_errorf(err, NEEDLE_EINVAL, "%s: window %d is larger than the model's max_seq_len %d", where,
                         opt->kv_window, max_seq);
    m->window = opt && opt->kv_window > 0 ? opt->kv_window : m->net->default_window;
    if (opt && (opt->layout < NEEDLE_LAYOUT_AUTO || opt->layout > NEEDLE_LAYOUT_2_0_15))
        return nd_errorf(err, NEEDLE_EINVAL, "%s: layout %d is not a NEEDLE_LAYOUT_* value", where, opt->layout);
    /* auto: the layout the model's generation was trained on (2.0.15 for Needle 3) */
    m->layout = nd_chat_layout_resolve(opt ? opt->layout : NEEDLE_LAYOUT_AUTO, nd_config_generation(&m->net->weights.cfg));
    int rc = open_tokenizer(m, tokenizer_path, where, err);
    if (!rc) rc = nd_agent_model_prepare(m, err);
    /* a tokenizer problem names the file it came from (the .model, or the model holding it) */
    const char *tok_where = tokenizer_path ? tokenizer_path : where;
    if (rc && rc != NEEDLE_ENOMEM && err && strncmp(err->message, tok_where, strlen(tok_where)) != 0) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        nd_errorf(err, rc, "%s: %s", tok_where, why);
    }
    return rc;
}

int needle_model_open(const char *path, const char *tokenizer_path, const needle_model_options *opt,
                      needle_model **out, needle_error *err)
{
    if (!out) return nd_errorf(err, NEEDLE_EINVAL, "model: NULL output handle");
    *out = NULL;
    if (!path) return nd_errorf(err, NEEDLE_EINVAL, "model: NULL path");
    needle_model *m = calloc(1, sizeof *m);
    if (!m) return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory");
    nd_model_options mo;
    model_options(opt, &mo);
    int rc = nd_model_open(path, &mo, &m->net, err);
    if (!rc) rc = finish_open(m, opt, tokenizer_path, path, err);
    if (rc) {
        needle_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int needle_model_open_memory(const void *data, size_t size, const needle_model_options *opt, needle_model **out,
                             needle_error *err)
{
    if (!out) return nd_errorf(err, NEEDLE_EINVAL, "model: NULL output handle");
    *out = NULL;
    if (!data || size == 0) return nd_errorf(err, NEEDLE_EINVAL, "model: empty buffer");
    needle_model *m = calloc(1, sizeof *m);
    if (!m) return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory");
    m->blob = malloc(size);
    if (!m->blob) {
        free(m);
        return nd_errorf(err, NEEDLE_ENOMEM, "model: out of memory copying %zu bytes", size);
    }
    memcpy(m->blob, data, size);
    nd_model_options mo;
    model_options(opt, &mo);
    int rc = nd_weights_load_cact_buffer(m->blob, size, "<memory>", &m->mem_weights, err);
    if (!rc) {
        m->has_mem_weights = 1;
        rc = nd_model_create(&m->mem_weights, &mo, &m->net, err);
    }
    if (!rc) rc = finish_open(m, opt, NULL, "<memory>", err);
    if (rc) {
        needle_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

void needle_model_close(needle_model *m)
{
    if (!m) return;
    nd_agent_model_release(m);
    nd_tokenizer_free(m->tok);
    nd_model_free(m->net);
    if (m->has_mem_weights) nd_weights_free(&m->mem_weights);
    free(m->blob);
    free(m);
}

const char *needle_model_backend(const needle_model *m, const char **why)
{
    if (why) *why = m && m->net ? m->net->backend_why : "no model";
    if (!m || !m->net || !m->net->be) return "none";
    return m->net->be->name;
}

/* ------------------------------------------------------------------ sessions */

int needle_session_open(needle_model *m, const needle_session_options *opt, needle_session **out, needle_error *err)
{
    if (!out) return nd_errorf(err, NEEDLE_EINVAL, "session: NULL output handle");
    return nd_session_open(m, opt, out, err);
}

void needle_session_close(needle_session *s) { nd_session_free(s); }

int needle_session_set_tools(needle_session *s, const char *tools_json, needle_error *err)
{
    return nd_session_set_tools(s, tools_json, err);
}

void needle_session_reset(needle_session *s) { nd_session_reset(s); }

/* 1 when the text holds nothing but blanks: there is no request to answer,
 * and a model asked anyway invents one. */
static int blank_text(const char *s)
{
    if (!s) return 0; /* NULL is the session's own error */
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\f' && *s != '\v') return 0;
    return 1;
}

int needle_session_send(needle_session *s, const char *user_text, char **envelope, needle_error *err)
{
    if (envelope) *envelope = NULL;
    if (blank_text(user_text)) return nd_errorf(err, NEEDLE_EINVAL, "the request is empty (nothing to answer)");
    return nd_session_turn(s, ND_TURN_USER, user_text, 0, envelope, err);
}

int needle_session_tool_result(needle_session *s, const char *result_json, char **envelope, needle_error *err)
{
    return nd_session_turn(s, ND_TURN_TOOL_RESULT, result_json, 0, envelope, err);
}

void needle_free(void *p) { free(p); }

/* ------------------------------------------------------------------ compatibility layer */

static pthread_mutex_t compat_lock = PTHREAD_MUTEX_INITIALIZER;
static needle_model *compat_model;     /* from needle_load, or opened by needle_init */
static needle_session *compat_session; /* needle_init's session */

/* NEEDLE_MODEL, else the bundled default when it exists. */
static int open_default_model(needle_model **out)
{
    const char *env = getenv("NEEDLE_MODEL");
    const char *path = env && env[0] ? env : "models/needle-default.cact";
    if (!env && access(path, R_OK) != 0) return NEEDLE_ESTATE;
    needle_error err;
    return needle_model_open(path, NULL, NULL, out, &err);
}

int needle_init(const char *system, const char *tools_json, const char *tool_index_path)
{
    pthread_mutex_lock(&compat_lock);
    int rc = 0;
    if (!compat_model) rc = open_default_model(&compat_model);
    if (!rc) {
        needle_session_options o;
        memset(&o, 0, sizeof o);
        o.system = system;
        o.tools_json = tools_json;
        o.tool_index_path = tool_index_path;
        needle_error err;
        needle_session *fresh = NULL;
        /* the working session is replaced only once the new one opened: bad tools keep it */
        rc = needle_session_open(compat_model, &o, &fresh, &err);
        if (!rc) {
            needle_session_close(compat_session);
            compat_session = fresh;
        }
    }
    pthread_mutex_unlock(&compat_lock);
    return rc;
}

/* Writes the envelope (NUL-terminated) and returns its length in bytes; a
 * buffer too small gets an empty string and NEEDLE_ETOOSMALL (the turn is
 * still part of the conversation). */
int needle_complete(const char *text, int max_new_tokens, char *out, int out_size)
{
    if (!out || out_size <= 0) return NEEDLE_EINVAL;
    out[0] = '\0';
    pthread_mutex_lock(&compat_lock);
    int rc;
    char *env = NULL;
    if (!compat_session) rc = NEEDLE_ESTATE;
    else if (blank_text(text)) rc = NEEDLE_EINVAL;
    else {
        needle_error err;
        rc = nd_session_turn(compat_session, ND_TURN_USER, text, max_new_tokens, &env, &err);
    }
    pthread_mutex_unlock(&compat_lock);
    if (rc) return rc;
    size_t n = strlen(env);
    if (n + 1 > (size_t)out_size) rc = NEEDLE_ETOOSMALL;
    else {
        memcpy(out, env, n + 1);
        rc = (int)n;
    }
    free(env);
    return rc;
}

void needle_reset(void)
{
    pthread_mutex_lock(&compat_lock);
    nd_session_reset(compat_session);
    pthread_mutex_unlock(&compat_lock);
}

/* Unlike the released engine, a second load replaces the first: the old
 * session and model are closed (call needle_init again afterwards). */
int needle_load(const char *blob, uint64_t size)
{
    if (!blob || size == 0 || size > (uint64_t)SIZE_MAX) return NEEDLE_EINVAL;
    needle_model *m = NULL;
    needle_error err;
    int rc = needle_model_open_memory(blob, (size_t)size, NULL, &m, &err);
    if (rc) return rc;
    pthread_mutex_lock(&compat_lock);
    needle_session_close(compat_session);
    compat_session = NULL;
    needle_model_close(compat_model);
    compat_model = m;
    pthread_mutex_unlock(&compat_lock);
    return 0;
}
