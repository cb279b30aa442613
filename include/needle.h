/* needle.h - the public C API of libneedle.
 *
 * libneedle runs, fine-tunes and exports Needle tool-calling models.  Every
 * function returns 0 (NEEDLE_OK) or a negative NEEDLE_E* code and, where it
 * takes a needle_error*, fills it with a one-line message naming the file and
 * the place.  There is no global mutable state: models and sessions are
 * handles, many per process.  The four released-engine calls at the bottom
 * are a thin compatibility layer over one hidden default session.
 */
#ifndef NEEDLE_H
#define NEEDLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEEDLE_VERSION "0.1.0"

/* Error codes: 0 is success, every failure is a distinct negative value. */
enum {
    NEEDLE_OK = 0,
    NEEDLE_EIO = -1,          /* a file could not be opened, read or written */
    NEEDLE_EFORMAT = -2,      /* a file's contents are malformed */
    NEEDLE_ENOMEM = -3,       /* an allocation failed */
    NEEDLE_EINVAL = -4,       /* a bad argument from the caller */
    NEEDLE_EJSON = -5,        /* malformed JSON text */
    NEEDLE_ESCHEMA = -6,      /* a JSON Schema that cannot be enforced */
    NEEDLE_EUTF8 = -7,        /* text that is not valid UTF-8 */
    NEEDLE_ETOOSMALL = -8,    /* the caller's output buffer is too small */
    NEEDLE_EUNSUPPORTED = -9, /* a valid input this build cannot handle */
    NEEDLE_EBACKEND = -10,    /* the requested compute backend is unavailable */
    NEEDLE_ESTATE = -11,      /* a call made in the wrong state (e.g. before init) */
    NEEDLE_ELIMIT = -12       /* a size or depth limit was exceeded */
};

/* A caller-owned error record.  message is always NUL-terminated. */
typedef struct needle_error {
    int code;
    char message[512];
} needle_error;

/* A short static name for an error code ("NEEDLE_EFORMAT", ...). */
const char *needle_strerror(int code);

/* ---- Models: load once, share read-only between any number of sessions ---- */
typedef struct needle_model needle_model;

/* The chat layout a model was trained on (how prompts are rendered; see
 * src/text/chat.h).  AUTO: what the model expects - the 2.0.15 layout for
 * Needle 3 files; for Needle 2 files the 2.0.8 layout the released weights
 * and the bundled model were trained with (README, "Chat layouts"). */
enum {
    NEEDLE_LAYOUT_AUTO = 0,
    NEEDLE_LAYOUT_2_0_8 = 1,  /* tools JSON \uXXXX-escaped, system as given, <think>R</think> always */
    NEEDLE_LAYOUT_2_0_15 = 2  /* raw UTF-8 JSON, stripped system/reasoning, think block only with reasoning */
};

typedef struct needle_model_options {
    int threads;         /* <= 0: NEEDLE_THREADS, else every core */
    const char *backend; /* NULL: NEEDLE_BACKEND, else the best one built and present */
    int kv_window;       /* 0: the file's window (the .cact header, or the config's budget window) */
    int layers;          /* Needle 3: run ladder rung N (SPEC-needle3 section 2) of an unsliced file; 0 = all */
    int layout;          /* NEEDLE_LAYOUT_*; 0 (AUTO): what the model expects */
    int acts;            /* activations: NEEDLE_ACTS_A8 (0, the default: the reference's deploy
                            numerics, int8 activations at its quantisation points, integer kernels)
                            or NEEDLE_ACTS_FLOAT (float32 activations, the float goldens' path) */
} needle_model_options;

enum { NEEDLE_ACTS_A8 = 0, NEEDLE_ACTS_FLOAT = 1 };

/* Open a .cact deploy file or a .safetensors checkpoint (a checkpoint needs a
 * tokenizer: `tokenizer_path` names a SentencePiece .model; NULL for .cact). */
int needle_model_open(const char *path, const char *tokenizer_path, const needle_model_options *opt,
                      needle_model **out, needle_error *err);
/* Open a .cact held in memory (the bytes are copied). */
int needle_model_open_memory(const void *data, size_t size, const needle_model_options *opt, needle_model **out,
                             needle_error *err);
/* Close a model; every session opened on it must be closed first. */
void needle_model_close(needle_model *m);
/* The backend computing for this model ("cpu", "cuda"), and a line saying why. */
const char *needle_model_backend(const needle_model *m, const char **why);

/* The width of the model's text embedding (the contrastive head for Needle 2
 * models); 0 when the model has no embedding head. */
int needle_model_embed_dim(const needle_model *m);
/* Embed [BOS] + enc(text) (full attention, the first max_seq_len tokens) into
 * out[0..dim), an L2-normalised vector; dim must equal needle_model_embed_dim.
 * Thread-safe: needs no session and may run on many threads at once. */
int needle_model_embed(needle_model *m, const char *text, float *out, int dim, needle_error *err);

/* ---- Sessions: one conversation each; thread-safe across sessions ---- */
typedef struct needle_session needle_session;

typedef struct needle_session_options {
    const char *system;          /* system facts "date: ...; locale: ..."; NULL or "" for none */
    const char *tools_json;      /* JSON array of {"name","description","parameters"}; may be NULL */
    const char *tool_index_path; /* persistent tool-embedding index (retrieval); NULL for none */
    int max_new_tokens;          /* per turn; 0: 256 */
    int max_reasoning_tokens;    /* free text inside <think>; 0: 64 */
    float temperature;           /* 0: greedy */
    float top_p;                 /* 0 or 1: no nucleus cut */
    uint64_t seed;               /* sampling seed */
    int strict;                  /* 1: withhold calls with a value the request does not say (ungrounded):
                                    they go to "suppressed_calls", function_calls is [].  Every session
                                    withholds a negated request, a value outside the schema and a
                                    required value filled with a placeholder (docs/envelope.md). */
    int grounded_decoding;       /* free-text argument values (strings whose schema has no enum, const,
                                    pattern, format or length bounds) may only be copies - whole words,
                                    case as written - of what the conversation said (user texts, tool
                                    results) and the system facts: a decode-time constraint.  (In every
                                    session, values the request settles - a name copied in part, a
                                    choice named, a time, number, quantity or date said - are then taken
                                    from it: validation.completed, docs/envelope.md.)
                                    1: on, -1: off, 0: the default: NEEDLE_GROUNDED_DECODING_DEFAULT, but
                                    off when strict is set (strict withholds calls with ungrounded values,
                                    which copying makes rare).  A first turn that runs out of tokens under
                                    the constraint is answered again without it (docs/envelope.md) */
    int split_requests;          /* a first request answered with one call or none that can be cut in two
                                    ("... and then ...", "... plus ...") is answered one part at a time,
                                    and the parts' calls taken when both sides call something grounded
                                    (validation.split names the parts; docs/envelope.md).  1 or 0: on
                                    (the default), -1: off */
    int ask_again;               /* a first request the model answers with no call is asked again ("please "
                                    and the request) in a scratch session, and that answer taken when it
                                    calls something grounded with no sign of a request the contract refuses
                                    (validation.asked_again; docs/envelope.md); still with no call, a
                                    request in a messaging frame ("text mom that I'll be late") is
                                    answered with the call the frame spells out; and one where the model
                                    gave a call at least 0.1 of the probability at the list's first
                                    token is answered with that call when the request names its tool
                                    and says its values (validation.leaned); one answered with one
                                    call to a tool while it names another tool's choice is asked
                                    again with those tools alone.  1 or 0: on (the default), -1: off */
} needle_session_options;

/* What grounded_decoding 0 means outside strict sessions (1: on). */
#define NEEDLE_GROUNDED_DECODING_DEFAULT 1

int needle_session_open(needle_model *m, const needle_session_options *opt, needle_session **out,
                        needle_error *err);
void needle_session_close(needle_session *s);
/* Replace the declared tools (and the grammar); the conversation restarts. */
int needle_session_set_tools(needle_session *s, const char *tools_json, needle_error *err);
/* Forget the conversation (tools and system kept; the cached tool block is reused). */
void needle_session_reset(needle_session *s);

/* One turn.  `user_text` is the user's request; needle_session_tool_result
 * sends a tool's JSON result back as the next user turn.  On success *envelope
 * receives the turn's JSON envelope (SPEC section 10), heap-allocated: free it
 * with needle_free.  A model error still returns an envelope with
 * "success":false when one can be produced. */
int needle_session_send(needle_session *s, const char *user_text, char **envelope, needle_error *err);
int needle_session_tool_result(needle_session *s, const char *result_json, char **envelope, needle_error *err);
/* Either turn with its own token budget (max_new_tokens <= 0: the session's):
 * is_tool_result 0 sends user text as needle_session_send, 1 a tool's JSON
 * result as needle_session_tool_result. */
int needle_session_turn(needle_session *s, int is_tool_result, const char *text, int max_new_tokens, char **envelope,
                        needle_error *err);

void needle_free(void *p);

/* ---- Training and export: the work of `needle finetune` and `needle build` ----
 * In-process and blocking; progress lines go where the CLI prints them
 * (finetune: stderr, build: stdout) unless `quiet` is set. */
typedef struct needle_finetune_options {
    const char *data_path;       /* JSONL rows {query, tools, answers|function_calls, reasoning?, system?, turns?} */
    const char *checkpoint_path; /* the base .safetensors checkpoint, or a .cact (dequantised, with a warning) */
    const char *out_path;        /* the LoRA adapter (default) or, with full, the whole checkpoint */
    const char *tokenizer_path;  /* a SentencePiece .model, or a .cact whose tokenizer to use (required) */
    int full;                    /* 1: train every parameter (heads excepted); 0: LoRA */
    int epochs;                  /* 0: automatic (about 300 steps: 1 to 20 epochs, by the data's size) */
    int batch_size, lora_rank, max_len, threads, log_every;
    double lr;                   /* 0: automatic (5e-4 full, 2e-3 LoRA) */
    double lora_alpha, val_split;
    uint64_t seed;
    int bucket_batch;            /* 0: one padded length for the run (SPEC); 1: per-batch buckets */
    int bucket_window;           /* bucket_batch only: batches per sorting window (0: no sorting) */
    int save_every;              /* > 0: write the whole training state every N steps to state_path */
    const char *state_path;      /* NULL: OUT.state */
    const char *resume_path;     /* continue a saved state; its recorded options replace the ones above */
    int stop_after;              /* > 0: stop after N steps in total */
    const char *plot_path;       /* an SVG of the loss curves; NULL for none */
    int quiet;                   /* 1: no progress lines */
    const char *val_path;        /* validation rows from this file (generate-data's val.jsonl); NULL: val_split */
    int eval_every;              /* validation loss every N steps as well as after each epoch; 0: automatic */
    int patience;                /* stop after N validations without a better loss; 0: never */
    int keep_last;               /* 1: return the last weights; 0: those of the best validation loss */
    int layout;                  /* NEEDLE_LAYOUT_*: how rows are rendered; 0 (auto): as needle_model_open would */
    const char *qat_bits;        /* LoRA numerics: NULL/"auto" (deploy: config's weight_bits, else CQ 4, + A8),
                                    "none" (full precision), "2" or "4"; recorded in the adapter.  full:
                                    "2" or "4" trains under that deploy numerics, else full precision */
    double decision_weight;      /* > 0 and != 1: the loss gradient of each answer's first token (after
                                    <tool_call>: call or no call) is scaled by it; 0 or 1: plain CE */
} needle_finetune_options;

typedef struct needle_finetune_result {
    int rows, steps, stopped;    /* rows used, optimiser steps run, 1 when stop_after ended the run */
    double first_loss, last_loss, last_val_loss, seconds, tokens_per_s;
    int epochs;                  /* the epochs planned (after the automatic choice) */
    int best_step, early_stopped;/* the step whose weights were returned (keep_last 0); 1: patience ran out */
    double best_val_loss, lr;    /* NAN without validation; the learning rate used */
} needle_finetune_result;

/* The CLI's defaults: automatic epochs and lr, batch 16, LoRA rank 16 alpha 32, max_len 1024, val 0.1,
 * validation about 10 times a run, patience 3, the best weights kept. */
void needle_finetune_options_default(needle_finetune_options *o);
/* Fine-tune; `res` may be NULL. */
int needle_finetune(const needle_finetune_options *o, needle_finetune_result *res, needle_error *err);

typedef struct needle_build_options {
    const char *checkpoint_path; /* a .safetensors checkpoint, or a .cact to re-quantise */
    const char *tokenizer_path;  /* a SentencePiece .model or a .cact; NULL: the checkpoint's own (.cact) */
    const char *bits;            /* "2", "3", "4" or "1.58" for every matrix; NULL: bits_map or the config */
    const char *bits_map;        /* per-tensor widths "default=4,embedding=3,..."; NULL: bits or the config */
    const char *lora_path;       /* an adapter from needle_finetune to merge first; NULL for none */
    const char *out_path;        /* the .cact to write (atomically) */
    int kv_window;               /* > 0: the KV window stored in the header; 0: the config's */
    int quiet;                   /* 1: no progress lines */
} needle_build_options;

/* Quantise a checkpoint (optionally with a LoRA adapter merged) into a .cact. */
int needle_build(const needle_build_options *o, needle_error *err);

/* ---- Released engine compatibility layer (one hidden session per process) ----
 * needle_load copies a .cact from memory and replaces any model loaded before
 * (closing it and its session).  needle_init opens the hidden session on that
 * model, or, when none was loaded, on $NEEDLE_MODEL or models/needle-default.cact.
 * needle_complete writes the turn's envelope (NUL-terminated) and returns its
 * length; NEEDLE_ETOOSMALL (out set to "") when out_size cannot hold it;
 * max_new_tokens <= 0 means the session's default.  Calls are serialised. */
int needle_init(const char *system, const char *tools_json, const char *tool_index_path);
int needle_complete(const char *text, int max_new_tokens, char *out, int out_size);
void needle_reset(void);
int needle_load(const char *blob, uint64_t size);

#ifdef __cplusplus
}
#endif
#endif /* NEEDLE_H */
