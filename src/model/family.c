/* The model families (family.h), in the order a checkpoint is offered to them: a new family
 * goes ahead of DeepSeek's, which takes every checkpoint left (its config parser names what
 * it cannot read). */
#include "model/family.h"

static const struct model_family *const families[] = {&model_family_v4, &model_family_deepseek};

int model_families(const struct model_family *const **out)
{
	*out = families;
	return (int)(sizeof families / sizeof families[0]);
}

const struct model_family *model_family_find(const char *dir)
{
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
		if (families[i]->matches(dir))
			return families[i];
	return families[sizeof families / sizeof families[0] - 1];
}
