/* The backends compiled in, in preference order (best first). */
#include <string.h>

#include "attn/backends.h"

static const struct attn_backend *const backends[] = {
	&attn_backend_flashmla,
	&attn_backend_flash_attn_mla,
	&attn_backend_reference_mla,
};

int attn_backend_count(void)
{
	return (int)(sizeof backends / sizeof backends[0]);
}

const struct attn_backend *attn_backend_at(int i)
{
	return i >= 0 && i < attn_backend_count() ? backends[i] : NULL;
}

const struct attn_backend *attn_backend_by_name(const char *name)
{
	for (int i = 0; name && i < attn_backend_count(); i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}
