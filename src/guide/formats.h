/* The JSON Schema string formats whose texts are a regular language, as regexes for
 * guide/regex_dfa.h, enforced as xgrammar does: RFC 3339 dates (month lengths and leap years),
 * times (with an offset), date-times and durations; RFC 5322 dot-atom addresses with a dotted
 * domain; RFC 4122 UUIDs; dotted-quad IPv4; RFC 3986 IPv6 and URIs; RFC 1123 host names.
 * Other formats stay annotations, as JSON Schema defines them. */
#ifndef MLA_GUIDE_FORMATS_H
#define MLA_GUIDE_FORMATS_H

/* The regex of a format's texts, or NULL (not one of those, or format NULL) */
const char *guide_format_regex(const char *format);

#endif
