#include "server/openai/resp_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	char *id;
	json_t *response, *items;
	unsigned long long seq; /* insertion order: the smallest is dropped first */
};

struct resp_store {
	pthread_mutex_t mu;
	struct entry *e; /* [max], id NULL: free */
	int max;
	unsigned long long seq;
};

struct resp_store *resp_store_new(int max_entries)
{
	struct resp_store *st = calloc(1, sizeof *st);
	if (!st)
		return NULL;
	st->max = max_entries > 0 ? max_entries : 0;
	if (st->max && !(st->e = calloc((size_t)st->max, sizeof *st->e))) {
		free(st);
		return NULL;
	}
	pthread_mutex_init(&st->mu, NULL);
	return st;
}

static void entry_clear(struct entry *e)
{
	free(e->id);
	json_decref(e->response);
	json_decref(e->items);
	memset(e, 0, sizeof *e);
}

void resp_store_free(struct resp_store *st)
{
	if (!st)
		return;
	for (int i = 0; i < st->max; i++)
		entry_clear(&st->e[i]);
	free(st->e);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

int resp_store_max(const struct resp_store *st) { return st ? st->max : 0; }

/* under mu: id's slot, or -1 (a linear scan: bounded by max, and a request does one) */
static int find(const struct resp_store *st, const char *id)
{
	for (int i = 0; i < st->max; i++)
		if (st->e[i].id && !strcmp(st->e[i].id, id))
			return i;
	return -1;
}

int resp_store_put(struct resp_store *st, const char *id, json_t *response, json_t *items)
{
	char *copy = st && st->max ? strdup(id) : NULL;
	if (!copy) {
		json_decref(response);
		json_decref(items);
		return -1;
	}
	pthread_mutex_lock(&st->mu);
	int slot = find(st, id);
	if (slot < 0) { /* a free slot, else the oldest entry's */
		slot = 0;
		for (int i = 0; i < st->max && st->e[slot].id; i++)
			if (!st->e[i].id || st->e[i].seq < st->e[slot].seq)
				slot = i;
	}
	entry_clear(&st->e[slot]);
	st->e[slot] = (struct entry){copy, response, items, st->seq++};
	pthread_mutex_unlock(&st->mu);
	return 0;
}

int resp_store_get(struct resp_store *st, const char *id, json_t **response, json_t **items)
{
	if (!st || !st->max)
		return -1;
	pthread_mutex_lock(&st->mu);
	int i = find(st, id);
	if (i >= 0) {
		if (response)
			*response = json_incref(st->e[i].response);
		if (items)
			*items = json_incref(st->e[i].items);
	}
	pthread_mutex_unlock(&st->mu);
	return i >= 0 ? 0 : -1;
}

int resp_store_delete(struct resp_store *st, const char *id)
{
	if (!st || !st->max)
		return -1;
	pthread_mutex_lock(&st->mu);
	int i = find(st, id);
	if (i >= 0)
		entry_clear(&st->e[i]);
	pthread_mutex_unlock(&st->mu);
	return i >= 0 ? 0 : -1;
}
