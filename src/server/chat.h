/* chat.h - the pieces of POST /v1/chat/completions (chat.c runs the turns,
 * chat_request.c reads the request, chat_answer.c writes the answer). */
#ifndef ND_SERVER_CHAT_H
#define ND_SERVER_CHAT_H

#include <stdint.h>

#include "core/json.h"
#include "server/server_internal.h"

enum { ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };
enum { CHOICE_AUTO, CHOICE_NONE, CHOICE_REQUIRED, CHOICE_NAMED };

/* One non-system message. */
typedef struct chat_msg {
    int role;
    char *text;    /* user / tool: the content text; assistant: NULL */
    uint64_t hash; /* this message's canonical hash */
} chat_msg;

/* A checked request. */
typedef struct chat_req {
    nd_json *root;
    chat_msg *msgs; /* non-system messages, in order */
    int n;
    nd_buf system;
    char *tools_json; /* needle form; NULL: no tools */
    int n_tools;
    int choice;
    const char *named;
    int max_tokens;
    float temperature, top_p;
    uint64_t seed;
    int stream, include_usage;
    int strict; /* needle extension "strict": true withholds calls the grounding checks flag */
    int copy_values; /* needle extension "copy_values": grounded decoding, 1 true, -1 false, 0 absent */
    int split;       /* needle extension "split": two-part requests in parts, 1 true, -1 false, 0 absent */
    int ask_again;   /* needle extension "ask_again": a request answered with no call asked again, as split */
    uint64_t settings; /* hash of everything above that shapes the session */
} chat_req;

/* A session turn's envelope, read (turn.calls etc. point into env). */
typedef struct turn {
    nd_json *env;
    const nd_json *calls; /* array */
    int success, error_code;
    const char *error, *reasoning, *type;
    double confidence; /* NAN: null */
    double prefill_tps, decode_tps, peak_ram_mb;
    int prompt_tokens, completion_tokens;
} turn;

/* What the answer says besides the turn. */
typedef struct answer {
    char id[40];
    long created;
    const char *model;
    int n_calls;
    const char *finish;
    int unmet;
    const char *session; /* "reused" | "new" | "none" */
    double queue_ms, total_ms;
    char *router; /* {"tools":[names]} retrieval showed the model, or NULL */
} answer;

/* Parse and check the request body into q (zeroed by the caller, q->system
 * initialised).  0, or -1 with r holding the 400/500 error. */
int chat_request_parse(chat_req *q, const nd_request *rq, nd_reply *r);
void chat_req_free(chat_req *q);
/* The text of the tool results msgs[from..to): one JSON value, or an array of them. */
char *chat_tool_results(const chat_req *q, int from, int to);
/* Continue a canonical assistant-message hash with one call. */
uint64_t chat_hash_call(uint64_t h, const char *name, const nd_json *args);

/* The answer as a chat.completion, or as SSE chunks when q->stream. */
void chat_answer(nd_reply *r, nd_server *srv, const chat_req *q, const turn *t, answer *a);

#endif
