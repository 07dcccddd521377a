/* Shortest decimal text of doubles (base/fmt.h). */
#include "base/fmt.h"

#include <stdio.h>
#include <stdlib.h>

void fmt_double_repr(double x, char *res, size_t cap)
{
	char e[40];
	for (int p = 1; p <= 17; p++) { /* the shortest round trip */
		snprintf(e, sizeof e, "%.*e", p - 1, x);
		if (strtod(e, NULL) == x)
			break;
	}
	/* e: [-]d[.ddd]e±XX → digits and the decimal point position */
	char digits[24];
	int nd = 0, neg = e[0] == '-';
	const char *p = e + neg;
	for (; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int decpt = atoi(p + 1) + 1;
	char out[64];
	size_t k = 0;
	if (neg)
		out[k++] = '-';
	if (decpt <= -4 || decpt > 16) {
		out[k++] = digits[0];
		if (nd > 1) {
			out[k++] = '.';
			for (int i = 1; i < nd; i++)
				out[k++] = digits[i];
		}
		snprintf(out + k, sizeof out - k, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
	} else if (decpt <= 0) {
		out[k++] = '0', out[k++] = '.';
		for (int i = 0; i < -decpt; i++)
			out[k++] = '0';
		for (int i = 0; i < nd; i++)
			out[k++] = digits[i];
		out[k] = 0;
	} else {
		for (int i = 0; i < (nd > decpt ? nd : decpt); i++) {
			if (i == decpt)
				out[k++] = '.';
			out[k++] = i < nd ? digits[i] : '0';
		}
		if (nd <= decpt)
			out[k++] = '.', out[k++] = '0';
		out[k] = 0;
	}
	snprintf(res, cap, "%s", out);
}

int fmt_double_fixed(double a, int max_places, char *out, size_t cap)
{
	for (int p = 0; p <= max_places; p++) {
		snprintf(out, cap, "%.*f", p, a);
		if (strtod(out, NULL) == a)
			return p;
	}
	return -1;
}
