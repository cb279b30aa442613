/* message_frame.c - a messaging request answered with no call, read by its
 * frame (message_frame.h). */
#include "agent/message_frame.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/message_span.h"
#include "agent/repair.h"
#include "core/buf.h"
#include "grammar/schema.h"

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_spaces(const char *t, size_t len, size_t i)
{
    while (i < len && is_space(t[i])) i++;
    return i;
}

/* The end of the word at t[i]: up to a space or one of : , ; ! ? " */
static size_t word_end(const char *t, size_t len, size_t i)
{
    size_t e = i;
    while (e < len && !is_space(t[e]) && !strchr(":,;!?\"", t[e])) e++;
    return e;
}

/* Where the phrase (ASCII, any case) ends when t[i..] starts with it and a
 * word ends there; 0 otherwise. */
static size_t phrase_at(const char *t, size_t len, size_t i, const char *phrase)
{
    size_t n = strlen(phrase);
    if (i + n > len || strncasecmp(t + i, phrase, n) != 0) return 0;
    if (i + n < len && !is_space(t[i + n]) && !strchr(":,;!?-", t[i + n])) return 0;
    return i + n;
}

/* The end of the first phrase of list (NULL-terminated) at t[i], or 0. */
static size_t any_phrase_at(const char *t, size_t len, size_t i, const char *const *list)
{
    for (const char *const *p = list; *p; p++) {
        size_t e = phrase_at(t, len, i, *p);
        if (e) return e;
    }
    return 0;
}

/* Does a quotation mark open at t[i] (" ' U+201C U+2018)? */
static int opens_quote(const char *t, size_t len, size_t i)
{
    if (i < len && (t[i] == '"' || t[i] == '\'')) return 1;
    return i + 2 < len && (unsigned char)t[i] == 0xE2 && (unsigned char)t[i + 1] == 0x80 &&
           ((unsigned char)t[i + 2] == 0x9C || (unsigned char)t[i + 2] == 0x98);
}

/* ------------------------------------------------------------ the recipient */

static const char *const FAMILY[] = {"mom", "mum", "mother", "mama", "dad", "father", "papa", "grandma", "grandpa",
                                     "granny", "grandad", "granddad", "nana", "gran", "sis", "bro", NULL};
static const char *const TITLES[] = {"Dr.", "Dr", "Mr.", "Mr", "Mrs.", "Mrs", "Ms.", "Ms", "Prof.", "Aunt",
                                     "Auntie", "Uncle", "Coach", NULL};
static const char *const GROUPS[] = {"group", "team", "chat", "channel", "crew", "family", NULL};

/* A word that may be (part of) a name: a capital or a non-ASCII letter first
 * (not a curly quotation mark), and not "I", "I'm", "I've", ... */
static int name_word(const char *t, size_t b, size_t e)
{
    unsigned char c = (unsigned char)t[b];
    if (e == b || opens_quote(t, e, b)) return 0;
    if (c == 'I' && (e == b + 1 || t[b + 1] == '\'' || (unsigned char)t[b + 1] == 0xE2)) return 0;
    return (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* A plain lower-case word (a-z, ' and -). */
static int lower_word(const char *t, size_t b, size_t e)
{
    if (e == b || t[b] < 'a' || t[b] > 'z') return 0;
    for (size_t k = b; k < e; k++)
        if (!((t[k] >= 'a' && t[k] <= 'z') || t[k] == '\'' || t[k] == '-')) return 0;
    return 1;
}

typedef struct {
    size_t begin, ends[3]; /* the recipient t[begin, ends[k]); shortest first */
    int n;
    size_t bare_end; /* where a text with no mark may start (0: none may) */
} recipient;

/* The recipient at t[i] (see message_frame.h), or 0. */
static int recipient_at(const char *t, size_t len, size_t i, recipient *r)
{
    memset(r, 0, sizeof *r);
    r->begin = i;
    size_t e = any_phrase_at(t, len, i, FAMILY);
    if (e) {
        r->ends[r->n++] = r->bare_end = e;
        return 1;
    }
    if ((e = phrase_at(t, len, i, "my"))) { /* "my landlord", "my team lead" */
        for (int k = 0; k < 2; k++) {
            size_t b = skip_spaces(t, len, e), we = word_end(t, len, b);
            if (!lower_word(t, b, we)) break;
            r->ends[r->n++] = e = we;
        }
        r->bare_end = r->n > 0 ? r->ends[0] : 0; /* "tell my sister happy birthday" */
        return r->n > 0;
    }
    if ((e = phrase_at(t, len, i, "the"))) { /* "the plumber", "the carpool group" (a mark must follow) */
        for (int k = 0; k < 3; k++) {
            size_t b = skip_spaces(t, len, e), we = word_end(t, len, b);
            if (!lower_word(t, b, we)) break;
            e = we;
            if (k == 0) r->ends[r->n++] = we;
            if (k > 0 && any_phrase_at(t, len, b, GROUPS) == we) {
                r->ends[r->n++] = we;
                return 1;
            }
        }
        return r->n > 0;
    }
    size_t p = i;
    size_t title = any_phrase_at(t, len, i, TITLES);
    if (!title && i + 3 <= len && !strncmp(t + i, "Dr.", 3)) title = i + 3; /* "Dr.Achebe" aside, "Dr." alone */
    if (title) p = skip_spaces(t, len, title);
    for (int k = 0; k < 3; k++) {
        size_t we = word_end(t, len, p);
        if (!name_word(t, p, we)) break;
        r->ends[r->n++] = we;
        p = skip_spaces(t, len, we);
    }
    r->bare_end = r->n > 0 ? r->ends[r->n - 1] : 0; /* a name runs over its words: "Ingrid Solberg" */
    return r->n > 0;
}

/* ------------------------------------------------------------ the mark and the text */

/* Where the text starts after a mark at t[i] (':', '-', an en dash, "that",
 * "saying", or an opening quotation mark: the text starts at the mark), or 0. */
static size_t after_mark(const char *t, size_t len, size_t i)
{
    i = skip_spaces(t, len, i);
    if (i >= len) return 0;
    if (t[i] == ':' || t[i] == '-') return i + 1;
    if (i + 2 < len && (unsigned char)t[i] == 0xE2 && (unsigned char)t[i + 1] == 0x80 && (unsigned char)t[i + 2] == 0x93)
        return i + 3;
    if (opens_quote(t, len, i)) return i;
    static const char *const WORDS[] = {"saying", "that", NULL};
    static const char *const SAYS[] = {"says", "reads", "said", NULL};
    size_t e = any_phrase_at(t, len, i, WORDS), x;
    if (e && (x = any_phrase_at(t, len, skip_spaces(t, len, e), SAYS))) e = x; /* "that says ..." */
    if (e && e < len && t[e] == ':') e++;
    return e;
}

/* Where a text with no mark starts at t[i]: "I", "I'm", ... or a lower-case
 * word that does not carry on the recipient or ask something else ("tell Ana
 * about the party"); 0 otherwise. */
static size_t bare_text(const char *t, size_t len, size_t i)
{
    static const char *const NOT_FIRST[] = {"and", "or", "about", "to", "for", "with", "if", "when", "at", "in",
                                            "on", "of", "from", "by", "so", "but", "how", "what",
                                            "where", "who", "why", "whether", "please", "pls", "plz", "thanks",
                                            "thx", "ty", "cheers", "asap", "now", NULL};
    i = skip_spaces(t, len, i);
    size_t e = word_end(t, len, i);
    if (e == i) return 0;
    if (t[i] == 'I' && (e == i + 1 || t[i + 1] == '\'' || (unsigned char)t[i + 1] == 0xE2)) return i;
    if (!lower_word(t, i, e) || any_phrase_at(t, len, i, NOT_FIRST) == e) return 0;
    return i;
}

/* The recipient and where the text starts, for the frame at t[i] (after the
 * fillers); 0 when none fits. */
/* Where "send a text to" and its kin end at t[i], or 0:
 *   (send|shoot|fire) [off|out] [a|an|the] [quick] (text message|text|message|msg|sms) (to|for) */
static size_t send_to_at(const char *t, size_t len, size_t i)
{
    static const char *const VERBS[] = {"send", "shoot", "fire", NULL};
    static const char *const PARTICLES[] = {"off", "out", NULL};
    static const char *const ARTICLES[] = {"a", "an", "the", NULL};
    static const char *const NOUNS[] = {"text message", "text", "message", "msg", "sms", NULL};
    static const char *const TO[] = {"to", "for", NULL};
    size_t e = any_phrase_at(t, len, i, VERBS), x;
    if (!e) return 0;
    if ((x = any_phrase_at(t, len, skip_spaces(t, len, e), PARTICLES))) e = x;
    if ((x = any_phrase_at(t, len, skip_spaces(t, len, e), ARTICLES))) e = x;
    if ((x = phrase_at(t, len, skip_spaces(t, len, e), "quick"))) e = x;
    if (!(e = any_phrase_at(t, len, skip_spaces(t, len, e), NOUNS))) return 0;
    return any_phrase_at(t, len, skip_spaces(t, len, e), TO);
}

static int read_frame(const char *t, size_t len, size_t i, size_t *r0, size_t *r1, size_t *text)
{
    static const char *const BARE_VERBS[] = {"text", "txt", "msg", "message", "tell", NULL};
    static const char *const MARK_VERBS[] = {"sms", "ping", "write to", "drop a line to", "get word to", NULL};
    static const char *const A_MESSAGE[] = {"a text", "a message", "a msg", "a quick text", "a quick message",
                                            "a text message", NULL};
    recipient r;
    size_t e;
    int bare_verb = 0, let = 0, send = 0;
    if ((e = send_to_at(t, len, i)) || (e = any_phrase_at(t, len, i, MARK_VERBS))) {
    } else if ((e = any_phrase_at(t, len, i, BARE_VERBS))) {
        bare_verb = 1;
    } else if ((e = phrase_at(t, len, i, "let"))) {
        let = 1;
    } else if ((e = phrase_at(t, len, i, "send"))) {
        send = 1;
    } else {
        return 0;
    }
    if (!recipient_at(t, len, skip_spaces(t, len, e), &r)) return 0;
    *r0 = r.begin;
    for (int k = r.n - 1; k >= 0; k--) { /* the longest recipient a mark follows */
        size_t after = r.ends[k], s = 0;
        if (let) {
            size_t know = phrase_at(t, len, skip_spaces(t, len, after), "know");
            if (!know) continue;
            size_t that = phrase_at(t, len, skip_spaces(t, len, know), "that");
            s = skip_spaces(t, len, that ? that : know);
            if (s >= len) continue;
        } else if (send) {
            size_t m = any_phrase_at(t, len, skip_spaces(t, len, after), A_MESSAGE);
            if (!m || !(s = after_mark(t, len, m))) continue;
        } else if (!(s = after_mark(t, len, after))) {
            continue;
        }
        *r1 = after;
        *text = s;
        return 1;
    }
    size_t s = bare_verb && r.bare_end ? bare_text(t, len, r.bare_end) : 0;
    if (!s) return 0;
    *r1 = r.bare_end;
    *text = s;
    return 1;
}

/* ------------------------------------------------------------ the tool */

static int key_in(const char *key, const char *const *list)
{
    for (const char *const *k = list; *k; k++)
        if (!strcasecmp(key, *k)) return 1;
    return 0;
}

/* The one declared tool that sends a message (see message_frame.h): 1 with
 * its name, parameters and the two keys, 0 when none or several fit. */
static int messaging_tool(const nd_json *tools, const char **name, const char **person, const char **text,
                          int *text_first)
{
    static const char *const PERSON_KEYS[] = {"recipient", "to", "contact", "recipient_name", NULL};
    static const char *const TEXT_KEYS[] = {"text", "message", "body", "content", NULL};
    int found = 0;
    for (size_t i = 0; tools && tools->type == ND_JSON_ARRAY && i < tools->count; i++) {
        const nd_json *t = nd_tool_declaration(&tools->items[i]), *n = nd_json_get(t, "name");
        const nd_json *params = nd_json_get(t, "parameters"), *props = nd_json_get(params, "properties");
        if (!n || n->type != ND_JSON_STRING || !props || props->type != ND_JSON_OBJECT) continue;
        const char *p = NULL, *x = NULL;
        int other_required = 0, ambiguous = 0, tf = 0;
        for (size_t k = 0; k < props->count; k++) {
            const char *key = props->keys[k];
            int free_text = nd_free_string_schema(&props->items[k]);
            if (free_text && key_in(key, PERSON_KEYS)) ambiguous |= p != NULL, p = key;
            else if (free_text && key_in(key, TEXT_KEYS)) ambiguous |= x != NULL, x = key, tf = p == NULL;
            else if (nd_schema_required(params, key)) other_required = 1;
        }
        if (!p || !x || ambiguous || other_required) continue;
        if (found++) return 0;
        *name = n->str;
        *person = p;
        *text = x;
        *text_first = tf;
    }
    return found == 1;
}

/* The frame read: the messaging tool and its two keys, and the recipient and
 * text (malloc'd: free both).  1 when the request is in a frame, 0 when not
 * (or memory runs out). */
typedef struct {
    const char *tool, *person_key, *text_key;
    int text_first; /* the schema names the text before the person */
    char *who, *message;
} frame;

/* A filler ending a sentence of its own ("Hi again. Go ahead and ..."): where it ends, or 0. */
static size_t filler_before_stop(const char *t, size_t len, size_t i, const char *const *list)
{
    for (const char *const *p = list; *p; p++) {
        size_t n = strlen(*p);
        if (i + n < len && !strncasecmp(t + i, *p, n) && t[i + n] == '.') return i + n;
    }
    return 0;
}

static int read_message_frame(const nd_json *tools, const char *request, frame *f)
{
    static const char *const FILLERS[] = {
        "could you please", "can you please", "would you please", "can you", "could you", "would you",
        "i need you to", "i want you to", "go ahead and", "quick one", "please", "pls", "plz", "kindly", "hey",
        "hi", "hello", "ok", "okay", "so", "oh", "um", "uh", "yo", "right", "alright", "also", "and",
        "i think we should", "i was wondering if you could", "i'd love it if you could", "i'd like you to",
        "i would like you to", "time to", "don't forget to", "remember to", "again", "when you get a chance",
        NULL};
    memset(f, 0, sizeof *f);
    if (!request || !messaging_tool(tools, &f->tool, &f->person_key, &f->text_key, &f->text_first)) return 0;
    size_t len = strlen(request), i = skip_spaces(request, len, 0), e;
    while ((e = any_phrase_at(request, len, i, FILLERS)) || (e = filler_before_stop(request, len, i, FILLERS))) {
        i = e;
        while (i < len && (is_space(request[i]) || strchr(",!:.", request[i]))) i++;
    }
    size_t r0, r1, s;
    if (!read_frame(request, len, i, &r0, &r1, &s)) return 0;
    size_t rb = r0, re = r1;
    while (re > rb && (request[re - 1] == '.' || request[re - 1] == ',')) re--; /* "Dr." keeps its point below */
    if (re < r1 && re > rb && re - rb >= 2 && !strncasecmp(request + re - 2, "Dr", 2)) re = r1;
    f->message = nd_message_text_at(request, s);
    f->who = re > rb ? nd_copy_text_span(request, rb, re) : NULL; /* (NULL: not valid UTF-8) */
    if (f->message && f->who) return 1;
    free(f->message);
    free(f->who);
    return 0;
}

char *nd_message_frame_call(const nd_json *tools, const char *request, int ascii, const char **tool,
                            const char **person_key, const char **text_key)
{
    frame f;
    if (!read_message_frame(tools, request, &f)) return NULL;
    nd_buf out;
    nd_buf_init(&out);
    nd_buf_puts(&out, "[{\"name\":");
    nd_json_write_string(&out, f.tool, strlen(f.tool), ascii);
    nd_buf_puts(&out, ",\"arguments\":{");
    /* in the schema's order, as the grammar writes them */
    const char *keys[2] = {f.person_key, f.text_key}, *values[2] = {f.who, f.message};
    int first = f.text_first;
    for (int k = 0; k < 2; k++) {
        int j = k ? 1 - first : first;
        if (k) nd_buf_putc(&out, ',');
        nd_json_write_string(&out, keys[j], strlen(keys[j]), ascii);
        nd_buf_putc(&out, ':');
        nd_json_write_string(&out, values[j], strlen(values[j]), ascii);
    }
    nd_buf_puts(&out, "}}]");
    free(f.message);
    free(f.who);
    if (out.oom) {
        nd_buf_free(&out);
        return NULL;
    }
    if (tool) *tool = f.tool;
    if (person_key) *person_key = f.person_key;
    if (text_key) *text_key = f.text_key;
    return nd_buf_take(&out);
}

/* Is the value a piece of the frame's (or the same text as the call's other
 * argument: a placeholder)?  Then the frame's is what the model meant. */
static int piece_of(const nd_json *v, const char *framed, const nd_json *other)
{
    if (!v || v->type != ND_JSON_STRING || memchr(v->str, 0, v->len)) return 0;
    if (v->len == strlen(framed) && !memcmp(v->str, framed, v->len)) return 0; /* already the frame's */
    if (other && other->type == ND_JSON_STRING && other->len == v->len && !memcmp(other->str, v->str, v->len)) return 1;
    return v->len > 0 && strstr(framed, v->str) != NULL;
}

int nd_fix_framed_message(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths)
{
    nd_one_call one;
    frame f;
    if (!request || !nd_repair_one_call(calls, tools, &one) || !read_message_frame(tools, request, &f)) return 0;
    int changed = 0, rc = 0;
    if (!strcmp(one.tool, f.tool)) {
        const char *keys[2] = {f.person_key, f.text_key}, *values[2] = {f.who, f.message};
        int fix[2];
        for (int k = 0; k < 2; k++)
            fix[k] = piece_of(nd_json_get(one.args, keys[k]), values[k], nd_json_get(one.args, keys[1 - k]));
        for (int k = 0; k < 2 && !rc; k++) {
            if (!fix[k]) continue;
            nd_buf quoted;
            nd_buf_init(&quoted);
            nd_json_write_string(&quoted, values[k], strlen(values[k]), 0);
            rc = quoted.oom || nd_object_put_json(one.args, keys[k], quoted.data, quoted.len) ? -1 : 0;
            nd_buf_free(&quoted);
            if (!rc) {
                changed++;
                nd_repair_note(paths, n_paths, one.tool, keys[k]);
            }
        }
    }
    free(f.message);
    free(f.who);
    return rc || paths->oom ? -1 : changed;
}
