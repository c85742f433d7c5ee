/* redzone.h — red zones between the buffers that a layout bumps out of one allocation
 * (SB_ARENA_CHECK; docs/HACKING.md). The encoder's and the decoder's activation arenas are
 * one allocation each, so neither ASan nor the CUDA emulator's guard pages see a kernel that
 * writes past one buffer's end into the next. With the check on, each buffer is followed by
 * a red zone (its rounding to 64 bytes and 64 bytes more) holding a known pattern, which
 * must still be there after every pass; a read of a zone reads NaN.
 *
 * The parameter table (parameters, gradients, gradient slots, moments) is one allocation per
 * buffer too, but kernels run over it flat (AdamW, clipping's sum of squares, the slots'
 * reduction), so its zones hold zero bytes (rz->zero), which those leave as they are: there
 * a write of anything but +0.0 is seen. */
#ifndef SB_REDZONE_H
#define SB_REDZONE_H

#include <stddef.h>

#include "backend.h"
#include "err.h"

struct sb_redzone {
	size_t off, len;  /* the zone in the allocation */
	size_t bytes;     /* what the buffer before it asked for */
	int line;         /* where the layout took that buffer */
	const char *what; /* or the buffer's name (a parameter tensor), NULL for a layout line */
	char *at;         /* set: the zone is here (a separate allocation's), whatever the base */
};

struct sb_redzones {
	int on;                /* SB_ARENA_CHECK was set (not "0") */
	struct sb_redzone *z;  /* NULL: a layout's counting pass (n only counts) */
	int n, cap;
	const char *file;      /* of the layout, for reports */
	int zero;              /* the pattern is zero bytes, not the signalling NaN (below) */
	const char *noun;      /* what a named zone's buffer is called in reports ("tensor" when NULL) */
};

/* Whether SB_ARENA_CHECK asks for red zones (set and not "0"). */
int sb_redzone_wanted(void);

/* The bump step of a layout: the offset of a buffer of `bytes` at *off, which moves past it
 * (rounded to 64 bytes) and, with rz->on, past its red zone, recorded when rz->z is set. */
size_t sb_redzone_take(struct sb_redzones *rz, size_t *off, size_t bytes, int line);

/* A zone of len bytes at off after the `bytes`-byte buffer `what` (its name must outlive rz),
 * for a layout that is not bumped; -1 when out of memory or len is over 128 bytes. */
int sb_redzone_push(struct sb_redzones *rz, size_t off, size_t len, size_t bytes, const char *what);
/* The step of a parameter table's layout (zero-byte zones, rz->zero): a tensor of n floats
 * at *off (in floats), then its zone (its rounding to 16 floats and 16 floats more) recorded
 * under name; *off moves past both. -1 when out of memory. */
int sb_redzone_push_floats(struct sb_redzones *rz, size_t *off, size_t n, const char *name);
/* The same for the zone of len bytes at `at`, the slack after a separate allocation of
 * `bytes` bytes (fill, check and at take the zone's own address, any base). */
int sb_redzone_push_at(struct sb_redzones *rz, void *at, size_t len, size_t bytes, const char *what);

/* After a counting pass: room for its n zones (rz->n back to 0 for the real pass). */
int sb_redzone_alloc(struct sb_redzones *rz);
void sb_redzone_free(struct sb_redzones *rz);

/* Write the pattern into every zone of the allocation at base (device memory; host memory
 * when be is NULL). */
int sb_redzone_fill(struct sb_backend *be, void *base, const struct sb_redzones *rz, struct sb_err *err);

/* SB_EINTERNAL naming the first zone written (and `after`, the pass just run, and `owner`,
 * whose arena), 0 when all hold their pattern or there are none. */
int sb_redzone_check(struct sb_backend *be, const void *base, const struct sb_redzones *rz, const char *after,
                     const char *owner, struct sb_err *err);

/* For tests: the device address of zone i, NULL past the last. */
void *sb_redzone_at(const void *base, const struct sb_redzones *rz, int i);

/* Allocation tails. With them enabled (sb_backend_open does so when SB_ARENA_CHECK is set),
 * every sb_be_alloc of the backend takes 64 bytes more and puts a red zone there, right
 * after the bytes asked for: the backends round allocations up (CPU to 64 bytes, CUDA to
 * 256), so a write just past a separate buffer's end is otherwise seen by neither ASan nor
 * the CUDA emulator's guard page. sb_be_tails_check checks every live allocation's zone
 * (SB_EINTERNAL naming the allocation's size and number, `after` what just ran); it is 0
 * without tails. Allocations made before sb_be_tails_enable have none. */
int sb_be_tails_enable(struct sb_backend *be);
void sb_be_tails_free(struct sb_backend *be);
int sb_be_tails_check(struct sb_backend *be, const char *after, struct sb_err *err);
/* For tests: the zone after allocation p, NULL when p has none. */
void *sb_be_tail(struct sb_backend *be, const void *p);

/* Scratch tails. A backend's scratch (a CPU worker's, the CUDA stream's) is one buffer that
 * op after op reuses, each asking for a different length, and it is grown with room to
 * spare: a write past what an op asked for lands in that room, where neither ASan nor a
 * guard page is. With tails enabled, each request puts a red zone of SB_SCRATCH_TAIL bytes
 * (sb_scratch_fill) right after the bytes it asked for, and first reads back the zone of the
 * request before (its op has run by then): a zone found written is kept as the tail's hit.
 * sb_be_tails_check reports the hit, else checks the last request's zone, of each tail the
 * backend's scratch_tail op lists. (The pattern's two functions are inline so that
 * lib/cuda, which calls nothing in lib/ (cuda_common.cuh), can use them too.) */
enum { SB_SCRATCH_TAIL = 64 };
struct sb_scratch_zone {
	char *at;         /* the zone; NULL: none */
	size_t bytes;     /* what the request before it asked for */
	const char *file; /* where that request was made */
	int line;
};
struct sb_scratch_tail {
	struct sb_scratch_zone now;         /* the last request's zone */
	struct sb_scratch_zone hit;         /* the first zone found written (at set), */
	unsigned char got[SB_SCRATCH_TAIL]; /* and its bytes as read back */
};
/* a zone's bytes: the red zones' pattern (0x7FA5A5A5 at every 4-byte offset) */
static inline void sb_scratch_fill(unsigned char *b)
{
	for (int j = 0; j < SB_SCRATCH_TAIL; j++)
		b[j] = j % 4 == 3 ? 0x7F : 0xA5;
}
static inline int sb_scratch_intact(const unsigned char *got)
{
	for (int j = 0; j < SB_SCRATCH_TAIL; j++)
		if (got[j] != (j % 4 == 3 ? 0x7F : 0xA5))
			return 0;
	return 1;
}
/* host memory: read back t's zone (a written one becomes the hit, unless there is one),
 * then set a zone right after the `bytes` at p (p NULL: none) */
void sb_scratch_tail_move(struct sb_scratch_tail *t, char *p, size_t bytes, const char *file, int line);
/* SB_EINTERNAL naming t's hit (written during "the op that asked for it"), else its last
 * zone when `got`, that zone's bytes read back, differ from the pattern (after `after`);
 * owner: whose scratch */
int sb_scratch_tail_report(const struct sb_scratch_tail *t, const unsigned char *got, const char *after,
                           const char *owner, struct sb_err *err);
/* For tests: the zone after scratch tail i's last request, NULL when none is set */
void *sb_be_scratch_zone(struct sb_backend *be, int i);

#endif
