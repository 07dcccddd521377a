/* JSON Schema string formats as regexes (guide/formats.h). */
#include "guide/formats.h"

#include <stddef.h>
#include <string.h>

#define RE_DATE                                                                                                      \
	"(?:\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)"               \
	"|02-(?:0[1-9]|1\\d|2[0-8]))|(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-" \
	"29)"
#define RE_TIME "(?:[01]\\d|2[0-3]):[0-5]\\d:(?:[0-5]\\d|60)(?:\\.\\d+)?(?:[Zz]|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)"
#define RE_OCTET "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"
#define RE_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define RE_ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
/* RFC 3339 appendix A: P then a date part (days, months or years, each with what follows it)
 * and maybe a time part, or a time part alone, or weeks */
#define RE_DUR_TIME "T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S)"
#define RE_DURATION \
	"P(?:(?:\\d+D|\\d+M(?:\\d+D)?|\\d+Y(?:\\d+M(?:\\d+D)?)?)(?:" RE_DUR_TIME ")?|" RE_DUR_TIME "|\\d+W)"
/* RFC 3986: IPv6address (the nine ways of writing "::"), and a URI with an authority and
 * path, query and fragment of its characters (unreserved, percent-encoded, sub-delims) */
#define RE_H16 "[0-9A-Fa-f]{1,4}"
#define RE_LS32 "(?:" RE_H16 ":" RE_H16 "|(?:" RE_OCTET "\\.){3}" RE_OCTET ")"
#define RE_IPV6                                                                                                       \
	"(?:(?:" RE_H16 ":){6}" RE_LS32 "|::(?:" RE_H16 ":){5}" RE_LS32 "|(?:" RE_H16 ")?::(?:" RE_H16                \
	":){4}" RE_LS32 "|(?:(?:" RE_H16 ":){0,1}" RE_H16 ")?::(?:" RE_H16 ":){3}" RE_LS32 "|(?:(?:" RE_H16           \
	":){0,2}" RE_H16 ")?::(?:" RE_H16 ":){2}" RE_LS32 "|(?:(?:" RE_H16 ":){0,3}" RE_H16 ")?::" RE_H16 ":" RE_LS32 \
	"|(?:(?:" RE_H16 ":){0,4}" RE_H16 ")?::" RE_LS32 "|(?:(?:" RE_H16 ":){0,5}" RE_H16 ")?::" RE_H16              \
	"|(?:(?:" RE_H16 ":){0,6}" RE_H16 ")?::)"
#define RE_PCT "%[0-9A-Fa-f]{2}"
#define RE_PCHAR "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|" RE_PCT ")"
#define RE_URI                                                                                                        \
	"[A-Za-z][A-Za-z0-9+.-]*:(?://(?:(?:[A-Za-z0-9._~!$&'()*+,;=:-]|" RE_PCT ")*@)?(?:\\[" RE_IPV6                \
	"\\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|" RE_PCT ")*)(?::\\d*)?(?:/" RE_PCHAR "*)*|/(?:" RE_PCHAR "+(?:/" RE_PCHAR \
	"*)*)?|" RE_PCHAR "+(?:/" RE_PCHAR "*)*)?(?:\\?(?:" RE_PCHAR "|[/?])*)?(?:#(?:" RE_PCHAR "|[/?])*)?"
const char *guide_format_regex(const char *format)
{
	static const struct {
		const char *name, *re;
	} formats[] = {
		{"date", RE_DATE},
		{"time", RE_TIME},
		{"date-time", "(?:" RE_DATE ")[Tt]" RE_TIME},
		{"duration", RE_DURATION},
		{"email", RE_ATOM "(?:\\." RE_ATOM ")*@(?:" RE_LABEL "\\.)+" RE_LABEL},
		{"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
		{"ipv4", "(?:" RE_OCTET "\\.){3}" RE_OCTET},
		{"hostname", RE_LABEL "(?:\\." RE_LABEL ")*"},
		{"ipv6", RE_IPV6},
		{"uri", RE_URI},
	};
	for (size_t i = 0; format && i < sizeof formats / sizeof *formats; i++)
		if (!strcmp(format, formats[i].name))
			return formats[i].re;
	return NULL;
}
