/* said_date.h - the date a request says, written into the call.
 *
 * "forecast for Kraków this Saturday" -> no date, "weather on 19 August
 * 2028" -> no date, "give me the Tbilisi forecast for 2026-07-01" -> no
 * date: the small models leave dates out or get them wrong, while the
 * request and the system's "date: YYYY-MM-DD" fact settle them:
 *
 *   - dates said: YYYY-MM-DD; a month name with a day ("March 3rd", "3
 *     March", "the 14th of February", with a year after it or else the next
 *     such day from today); relative to the system's date: "today",
 *     "tonight", "tomorrow", "the day after tomorrow", "yesterday", "in 3
 *     days", "in 2 weeks", "in a week", a weekday name ("Saturday", "this
 *     Saturday", "next Tuesday": the first such day after today; "this" on
 *     the day itself is today);
 *   - only a turn with one call whose tool has exactly one date argument
 *     (a string with format "date", or a pattern that accepts the date),
 *     when the request says exactly one date (relative ones need the
 *     system's date);
 *   - the date is written where the call's differs, or added when the call
 *     left the (optional) argument out.
 *
 * English only. */
#ifndef ND_SAID_DATE_H
#define ND_SAID_DATE_H

#include "core/buf.h"
#include "core/json.h"

/* The one date `request` says, as "YYYY-MM-DD" in out[11], relative to the
 * first YYYY-MM-DD in `system` (may be NULL: then only absolute dates with a
 * year are read).  Returns 1, or 0 when it says none or several. */
int nd_date_said(const char *request, const char *system, char out[11]);

/* Write or add that date as described; the argument's "tool.key" is appended
 * to *paths (a JSON array being built: '[' before the first entry, ','
 * before the others; *n_paths counts them).  Returns 1 when the call
 * changed, 0 when not, -1 when out of memory. */
int nd_fix_said_date(nd_json *calls, const nd_json *tools, const char *request, const char *system, nd_buf *paths,
                     int *n_paths);

#endif
