/* spoken_words.h - the words people say numbers, months and weekdays with.
 *
 * One copy of each list for every rule that reads a request: said_number,
 * clock_time, grounding, said_date, said_list, said_label and ask_again all
 * read "seven", "forty", "march" or "fridays" from these tables.  Every word
 * is lower case; callers compare lower-cased words.
 */
#ifndef ND_SPOKEN_WORDS_H
#define ND_SPOKEN_WORDS_H

/* "zero" .. "nineteen": ND_SMALL_NUMBERS[v] says v. */
extern const char *const ND_SMALL_NUMBERS[20];
/* "twenty" .. "ninety": ND_TENS_WORDS[k] says 20 + 10 k. */
extern const char *const ND_TENS_WORDS[8];
/* "january" .. "december": ND_MONTH_NAMES[m - 1] names month m. */
extern const char *const ND_MONTH_NAMES[12];
/* "monday" .. "sunday" (ISO order): ND_WEEKDAY_NAMES[d] names weekday d, Monday 0. */
extern const char *const ND_WEEKDAY_NAMES[7];

/* The value (0-19) of a small number word, or -1. */
int nd_small_number_word(const char *word);
/* The value (20, 30, ... 90) of a tens word, or -1. */
int nd_tens_word(const char *word);

#endif
