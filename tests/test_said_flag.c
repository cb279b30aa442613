/* test_said_flag.c - a yes/no setting the request names by its key is set
 * (src/agent/said_flag.h): said, negated before or after, a plural, written
 * over the model's value or added, and what is left alone (short keys, the
 * key said twice or inside the call's strings, two calls, non-boolean
 * schemas). */
#include "agent/said_flag.h"
#include "repair_check.h"

static const char *TOOLS =
    "[{\"name\":\"call_contact\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"speaker\":{\"type\":\"boolean\"},\"on\":{\"type\":\"boolean\"},"
    "\"video\":{\"type\":\"string\",\"enum\":[\"video\"]}}}},"
    "{\"name\":\"lock_door\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"door\":{\"type\":\"string\"},\"locked\":{\"type\":\"boolean\"}}}}]";

static int flags(nd_json *calls, const nd_json *tools, nd_buf *paths, int *np, void *request)
{
    return nd_fix_said_flags(calls, tools, (const char *)request, paths, np);
}

/* The call_contact call for Aoife (args: more members) after the rule: its
 * arguments, and " *" when the rule listed one. */
static const char *call_after(const char *request, const char *args)
{
    static char calls[256], out[512];
    snprintf(calls, sizeof calls, "[{\"name\":\"call_contact\",\"arguments\":{\"name\":\"Aoife\"%s}}]", args);
    const char *r = repair_apply(TOOLS, calls, flags, (void *)request);
    const char *a = strstr(r, "\"arguments\":");
    const char *bar = strchr(r, '|');
    if (!a || !bar) return r;
    snprintf(out, sizeof out, "%.*s%s", (int)(bar - a - 14), a + 12, strcmp(bar, "|[]") ? " *" : "");
    return out;
}

#define CALL(req, args, want) CHECKF(strcmp(call_after(req, args), want) == 0, "%s -> %s", req, call_after(req, args))

static void test_flags_said(void)
{
    CALL("ring my sister Aoife on speaker", "", "{\"name\":\"Aoife\",\"speaker\":true} *");
    CALL("Uh ring Aoife speaker: yes", "", "{\"name\":\"Aoife\",\"speaker\":true} *");
    CALL("call Aoife on the car speakers", "", "{\"name\":\"Aoife\",\"speaker\":true} *"); /* a plural */
    CALL("call Aoife, speaker on", ",\"speaker\":false", "{\"name\":\"Aoife\",\"speaker\":true} *"); /* written over */
    /* negated: before, or right after */
    CALL("phone Aoife but not on the speakers", "", "{\"name\":\"Aoife\",\"speaker\":false} *");
    CALL("call Aoife without speaker", "", "{\"name\":\"Aoife\",\"speaker\":false} *");
    CALL("call Aoife, I don't want speaker", "", "{\"name\":\"Aoife\",\"speaker\":false} *");
    CALL("call Aoife speaker off", "", "{\"name\":\"Aoife\",\"speaker\":false} *");
    CALL("call Aoife, speaker: no", ",\"speaker\":true", "{\"name\":\"Aoife\",\"speaker\":false} *");
    /* the model's value already right */
    CALL("call Aoife on speaker", ",\"speaker\":true", "{\"name\":\"Aoife\",\"speaker\":true}");
    /* left alone: not said, said twice, inside a string value, a short key, not a boolean */
    CALL("call Aoife", "", "{\"name\":\"Aoife\"}");
    CALL("speaker or no speaker, call Aoife", "", "{\"name\":\"Aoife\"}");
    CALL("call Aoife with the phone on", "", "{\"name\":\"Aoife\"}");
    CALL("video call Aoife", "", "{\"name\":\"Aoife\"}");
    CALL("call Aoife on speakerphone", "", "{\"name\":\"Aoife\"}"); /* not the whole word */
}

#define FLAGS(calls, req, want)                                                                                        \
    CHECKF(strcmp(repair_apply(TOOLS, calls, flags, (void *)(req)), want) == 0, "%s -> %s", req,                      \
           repair_apply(TOOLS, calls, flags, (void *)(req)))

static void test_other_calls(void)
{
    FLAGS("[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":false}}]", "make sure the patio door is locked",
          "[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":true}}]|[\"lock_door.locked\"]");
    FLAGS("[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":true}}]", "the patio door is not locked",
          "[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":false}}]|[\"lock_door.locked\"]");
    FLAGS("[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":false}}]", "unlock the patio door",
          "[{\"name\":\"lock_door\",\"arguments\":{\"door\":\"patio\",\"locked\":false}}]|[]");
    /* the word inside the call's own string */
    FLAGS("[{\"name\":\"call_contact\",\"arguments\":{\"name\":\"Aoife Speaker\"}}]", "call Aoife Speaker",
          "[{\"name\":\"call_contact\",\"arguments\":{\"name\":\"Aoife Speaker\"}}]|[]");
    /* two calls, undeclared tools, no calls */
    FLAGS("[{\"name\":\"lock_door\",\"arguments\":{}},{\"name\":\"lock_door\",\"arguments\":{}}]", "keep them locked",
          "[{\"name\":\"lock_door\",\"arguments\":{}},{\"name\":\"lock_door\",\"arguments\":{}}]|[]");
    FLAGS("[{\"name\":\"other\",\"arguments\":{}}]", "locked", "[{\"name\":\"other\",\"arguments\":{}}]|[]");
    FLAGS("[]", "locked", "[]|[]");
}

int main(void)
{
    RUN(test_flags_said);
    RUN(test_other_calls);
    return check_summary();
}
