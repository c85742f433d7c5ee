/* redzone.c — red zones between the buffers of one allocation (redzone.h). */
#include "redzone.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At every 4-byte-aligned offset the float 0x7FA5A5A5, a signalling NaN: a read gives NaN,
 * and an update in place (+=, *=) turns it into a quiet NaN of another bit pattern, so a
 * write is seen even when it adds to a NaN (0xFF bytes, a quiet NaN, would stay the same). */
static unsigned char zone_byte(const struct sb_redzones *rz, size_t off)
{
	static const unsigned char pat[4] = {0xA5, 0xA5, 0xA5, 0x7F};
	return rz->zero ? 0 : pat[off & 3];
}

enum { ZONE_MAX = 128 }; /* rounding to 64 bytes, and 64 more */

/* the zones recorded (a layout that took more buffers than its counting pass recorded none
 * past cap) */
static int recorded(const struct sb_redzones *rz) { return rz->z ? (rz->n < rz->cap ? rz->n : rz->cap) : 0; }

int sb_redzone_wanted(void)
{
	const char *e = getenv("SB_ARENA_CHECK");
	return e && *e && strcmp(e, "0");
}

size_t sb_redzone_take(struct sb_redzones *rz, size_t *off, size_t bytes, int line)
{
	size_t o = *off;
	size_t r = (bytes + 63) & ~(size_t)63;
	if (rz && rz->on) {
		r += 64;
		if (rz->z && rz->n < rz->cap)
			rz->z[rz->n] = (struct sb_redzone){o + bytes, r - bytes, bytes, line, NULL, NULL};
		rz->n++;
	}
	*off += r;
	return o;
}

int sb_redzone_push(struct sb_redzones *rz, size_t off, size_t len, size_t bytes, const char *what)
{
	if (len > ZONE_MAX)
		return -1;
	if (rz->n == rz->cap) {
		int cap = rz->cap ? 2 * rz->cap : 64;
		void *p = realloc(rz->z, (size_t)cap * sizeof *rz->z);
		if (!p)
			return -1;
		rz->z = p;
		rz->cap = cap;
	}
	rz->z[rz->n++] = (struct sb_redzone){off, len, bytes, 0, what, NULL};
	return 0;
}

int sb_redzone_push_floats(struct sb_redzones *rz, size_t *off, size_t n, const char *name)
{
	size_t end = *off + n;
	*off += ((n + 15) & ~(size_t)15) + 16;
	return sb_redzone_push(rz, end * sizeof(float), (*off - end) * sizeof(float), n * sizeof(float), name);
}

int sb_redzone_push_at(struct sb_redzones *rz, void *at, size_t len, size_t bytes, const char *what)
{
	if (sb_redzone_push(rz, 0, len, bytes, what))
		return -1;
	rz->z[rz->n - 1].at = at;
	return 0;
}

/* where zone z of the allocation at base is */
static char *zone_addr(const void *base, const struct sb_redzone *z)
{
	return z->at ? z->at : (char *)base + z->off;
}

int sb_redzone_alloc(struct sb_redzones *rz)
{
	free(rz->z);
	rz->z = NULL;
	rz->cap = rz->n;
	rz->n = 0;
	if (!rz->cap)
		return 0;
	rz->z = calloc((size_t)rz->cap, sizeof *rz->z);
	return rz->z ? 0 : -1;
}

void sb_redzone_free(struct sb_redzones *rz)
{
	free(rz->z);
	rz->z = NULL;
	rz->n = rz->cap = 0;
}

int sb_redzone_fill(struct sb_backend *be, void *base, const struct sb_redzones *rz, struct sb_err *err)
{
	unsigned char b[ZONE_MAX];
	for (int i = 0; i < recorded(rz); i++) {
		const struct sb_redzone *z = &rz->z[i];
		for (size_t j = 0; j < z->len; j++)
			b[j] = zone_byte(rz, z->off + j);
		if (be)
			SB_TRY(be->ops->upload(be, zone_addr(base, z), b, z->len, err));
		else
			memcpy(zone_addr(base, z), b, z->len);
	}
	return 0;
}

int sb_redzone_check(struct sb_backend *be, const void *base, const struct sb_redzones *rz, const char *after,
                     const char *owner, struct sb_err *err)
{
	/* the zones of the allocation at base in one download (a device copy each would cost
	 * more than the pass it checks), those at their own address one by one */
	size_t lo = SIZE_MAX, hi = 0;
	int nrel = 0;
	for (int i = 0; i < recorded(rz); i++)
		if (!rz->z[i].at) {
			lo = rz->z[i].off < lo ? rz->z[i].off : lo;
			hi = rz->z[i].off + rz->z[i].len > hi ? rz->z[i].off + rz->z[i].len : hi;
			nrel++;
		}
	unsigned char *span = nrel > 1 ? malloc(hi - lo) : NULL;
	if (span) {
		int rc = be ? be->ops->download(be, span, (const char *)base + lo, hi - lo, err) : 0;
		if (!be)
			memcpy(span, (const char *)base + lo, hi - lo);
		if (rc) {
			free(span);
			return rc;
		}
	}
	unsigned char got[ZONE_MAX];
	int rc = 0;
	for (int i = 0; i < recorded(rz) && !rc; i++) {
		const struct sb_redzone *z = &rz->z[i];
		const unsigned char *g = got;
		if (span && !z->at)
			g = span + (z->off - lo);
		else if (be)
			rc = be->ops->download(be, got, zone_addr(base, z), z->len, err);
		else
			memcpy(got, zone_addr(base, z), z->len);
		for (size_t j = 0; j < z->len && !rc; j++)
			if (g[j] != zone_byte(rz, z->off + j)) {
				char buf[160];
				if (z->what)
					snprintf(buf, sizeof buf, "the %zu-byte %s %s", z->bytes,
					         rz->noun ? rz->noun : "tensor", z->what);
				else
					snprintf(buf, sizeof buf, "the %zu-byte %s of %s:%d", z->bytes,
					         rz->noun ? rz->noun : "buffer", rz->file ? rz->file : "?", z->line);
				rc = SB_ERR(err, SB_EINTERNAL,
				            "arena check (SB_ARENA_CHECK) after %s: byte %zu past the end of %s (%s) "
				            "was written (0x%02x where 0x%02x belongs)",
				            after, j, buf, owner, g[j], zone_byte(rz, z->off + j));
			}
	}
	free(span);
	return rc;
}

void *sb_redzone_at(const void *base, const struct sb_redzones *rz, int i)
{
	if (i < 0 || i >= recorded(rz))
		return NULL;
	return zone_addr(base, &rz->z[i]);
}

/* ---------------------------------------------------------------- allocation tails */

struct tail {
	char *p;
	size_t bytes;     /* asked for */
	const char *file; /* where (sb_be_alloc's caller) */
	int line;
	long serial;      /* the backend's allocation number (from 1), for reports */
	struct tail *next;
};

struct sb_be_tails {
	pthread_mutex_t mu;
	struct tail *live;
	long serial;
};

enum { TAIL = 64 };

int sb_be_tails_enable(struct sb_backend *be)
{
	if (be->tails)
		return 0;
	struct sb_be_tails *t = calloc(1, sizeof *t);
	if (!t)
		return -1;
	pthread_mutex_init(&t->mu, NULL);
	be->tails = t;
	return 0;
}

void sb_be_tails_free(struct sb_backend *be)
{
	struct sb_be_tails *t = be->tails;
	if (!t)
		return;
	while (t->live) {
		struct tail *x = t->live;
		t->live = x->next;
		free(x);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
	be->tails = NULL;
}

/* the zone after one allocation, as a layout of one zone at its own address */
static struct sb_redzones tail_zone(const struct tail *x, struct sb_redzone *z)
{
	*z = (struct sb_redzone){0, TAIL, x->bytes, x->line, NULL, x->p + x->bytes};
	return (struct sb_redzones){.on = 1, .z = z, .n = 1, .cap = 1, .file = x->file};
}

void *sb_be_alloc_tailed(struct sb_backend *be, size_t bytes, const char *file, int line)
{
	struct sb_be_tails *t = be->tails;
	struct tail *x = malloc(sizeof *x);
	char *p = x ? be->ops->alloc(be, bytes + TAIL) : NULL;
	if (!p) {
		free(x);
		return NULL;
	}
	struct sb_err e = {0};
	struct sb_redzone z;
	*x = (struct tail){p, bytes, file, line, 0, NULL};
	struct sb_redzones r = tail_zone(x, &z);
	if (sb_redzone_fill(be, NULL, &r, &e)) {
		be->ops->free(be, p);
		free(x);
		return NULL;
	}
	pthread_mutex_lock(&t->mu);
	x->serial = ++t->serial;
	x->next = t->live;
	t->live = x;
	pthread_mutex_unlock(&t->mu);
	return p;
}

void sb_be_free_tailed(struct sb_backend *be, void *p)
{
	struct sb_be_tails *t = be->tails;
	pthread_mutex_lock(&t->mu);
	for (struct tail **x = &t->live; *x; x = &(*x)->next)
		if ((*x)->p == p) {
			struct tail *d = *x;
			*x = d->next;
			free(d);
			break;
		}
	pthread_mutex_unlock(&t->mu);
	be->ops->free(be, p); /* one made before the tails were enabled is freed the same way */
}

int sb_be_tails_check(struct sb_backend *be, const char *after, struct sb_err *err)
{
	struct sb_be_tails *t = be->tails;
	if (!t)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&t->mu);
	for (struct tail *x = t->live; x && !rc; x = x->next) {
		struct sb_redzone z;
		struct sb_redzones r = tail_zone(x, &z);
		char owner[64];
		snprintf(owner, sizeof owner, "allocation %ld of the %s backend", x->serial, be->name);
		rc = sb_redzone_check(be, NULL, &r, after, owner, err);
	}
	pthread_mutex_unlock(&t->mu);
	for (int i = 0; !rc && be->ops->scratch_tail; i++) {
		const struct sb_scratch_tail *st = NULL;
		unsigned char got[SB_SCRATCH_TAIL];
		char owner[96] = "";
		int k = be->ops->scratch_tail(be, i, &st, got, owner, sizeof owner);
		if (k == 0)
			break;
		rc = k < 0 ? SB_ERR(err, SB_EINTERNAL, "arena check (SB_ARENA_CHECK) after %s: %s could not be read back",
		                    after, owner)
		           : sb_scratch_tail_report(st, got, after, owner, err);
	}
	return rc;
}

void *sb_be_tail(struct sb_backend *be, const void *p)
{
	struct sb_be_tails *t = be->tails;
	void *at = NULL;
	if (!t)
		return NULL;
	pthread_mutex_lock(&t->mu);
	for (struct tail *x = t->live; x; x = x->next)
		if (x->p == p)
			at = x->p + x->bytes;
	pthread_mutex_unlock(&t->mu);
	return at;
}

/* ---------------------------------------------------------------- scratch tails */

/* a zone's report (its bytes read back in got) */
static int scratch_zone_check(const struct sb_scratch_zone *z, const unsigned char *got, const char *after,
                              const char *owner, struct sb_err *err)
{
	struct sb_redzone one = {0, SB_SCRATCH_TAIL, z->bytes, z->line, NULL, (char *)got};
	struct sb_redzones r = {.on = 1, .z = &one, .n = 1, .cap = 1, .file = z->file, .noun = "scratch"};
	return sb_redzone_check(NULL, NULL, &r, after, owner, err);
}

void sb_scratch_tail_move(struct sb_scratch_tail *t, char *p, size_t bytes, const char *file, int line)
{
	if (t->now.at && !t->hit.at && !sb_scratch_intact((const unsigned char *)t->now.at)) {
		t->hit = t->now;
		memcpy(t->got, t->now.at, SB_SCRATCH_TAIL);
	}
	t->now = (struct sb_scratch_zone){NULL, 0, NULL, 0};
	if (!p)
		return;
	sb_scratch_fill((unsigned char *)p + bytes);
	t->now = (struct sb_scratch_zone){p + bytes, bytes, file, line};
}

int sb_scratch_tail_report(const struct sb_scratch_tail *t, const unsigned char *got, const char *after,
                           const char *owner, struct sb_err *err)
{
	if (t->hit.at)
		return scratch_zone_check(&t->hit, t->got, "the op that asked for it", owner, err);
	return t->now.at && got ? scratch_zone_check(&t->now, got, after, owner, err) : 0;
}

void *sb_be_scratch_zone(struct sb_backend *be, int i)
{
	const struct sb_scratch_tail *t = NULL;
	unsigned char got[SB_SCRATCH_TAIL];
	char owner[96];
	if (!be->tails || !be->ops->scratch_tail || be->ops->scratch_tail(be, i, &t, got, owner, sizeof owner) != 1)
		return NULL;
	return t->now.at;
}
