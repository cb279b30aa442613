/* said_flag.h - a yes/no setting the request names by its own name.
 *
 * The small models leave out or flip booleans the request states in the
 * schema's words: "ring Aoife on speaker" -> call_contact without "speaker":
 * true, "make sure the patio door is locked" -> "locked": false.  When the
 * argument's key is itself a word, the request saying that word sets it:
 *
 *   - only turns with one call;
 *   - an argument whose schema is type "boolean" and whose key is one word of
 *     at least 4 ASCII letters ("speaker", "locked", "shuffle"; not "on");
 *   - the request says the key as a whole word (ASCII case ignored, a final
 *     "s" allowed: "speakers") exactly once, outside the call's string
 *     values;
 *   - false when one of the three words before it is "not", "no", "without",
 *     "never", "off" or a word ending in "n't", or the word right after it is
 *     "off", "no" or "false" ("speaker: no"); true otherwise.
 *
 * The value is written where the call's differs, or added where the call
 * left the argument out; listed in validation.completed. */
#ifndef ND_SAID_FLAG_H
#define ND_SAID_FLAG_H

#include "core/buf.h"
#include "core/json.h"

/* Write into the one call of `calls` (modified in place) each boolean the
 * request names, as described above; "tool.key" of each changed one is
 * appended to *paths (as in said_choice.h).  Returns how many changed, or -1
 * when out of memory. */
int nd_fix_said_flags(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

#endif
