/* multicell.c — see multicell.h. */
#include "multicell.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* present only in CUDA builds (lib/cuda/backend_cuda.h) */
int sb_cuda_failed(struct sb_backend *be) __attribute__((weak));
int sb_cuda_device_lost(struct sb_backend *be) __attribute__((weak));

struct mc_run {
	const struct sb_mc_opts *o;
	struct sb_mc_cell *cells;
	int n;
	sb_mc_cell_fn fn;
	atomic_int next;
	atomic_int lost;
	pthread_mutex_t mu;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void finish(struct mc_run *r, struct sb_mc_cell *c)
{
	if (r->o->done) {
		pthread_mutex_lock(&r->mu);
		r->o->done(c, r->o->done_ctx);
		pthread_mutex_unlock(&r->mu);
	}
}

static void *worker(void *p)
{
	struct mc_run *r = p;
	for (;;) {
		int i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			break;
		struct sb_mc_cell *c = &r->cells[i];
		sb_err_clear(&c->err);
		if (atomic_load(&r->lost)) {
			c->status = SB_MC_NOT_RUN;
			SB_ERR(&c->err, SB_EINTERNAL, "%s: not run: the device was lost by another cell of this process",
			       c->id ? c->id : "cell");
			finish(r, c);
			continue;
		}
		struct sb_backend *be = NULL;
		double t0 = now_s();
		int rc = sb_backend_open(r->o->device, r->o->threads, &be, &c->err);
		if (rc) {
			c->status = SB_MC_FAILED_DEVICE;
			if (sb_cuda_device_lost && sb_cuda_device_lost(NULL))
				atomic_store(&r->lost, 1);
			finish(r, c);
			continue;
		}
		rc = r->fn(be, c, &c->err);
		c->seconds = now_s() - t0;
		int dev_failed = sb_cuda_failed && sb_cuda_failed(be);
		if (sb_cuda_device_lost && sb_cuda_device_lost(be))
			atomic_store(&r->lost, 1);
		if (!rc && !dev_failed)
			c->status = SB_MC_OK;
		else if (dev_failed || atomic_load(&r->lost))
			c->status = SB_MC_FAILED_DEVICE;
		else
			c->status = SB_MC_FAILED;
		if (rc == 0 && dev_failed && !c->err.code)
			SB_ERR(&c->err, SB_EINTERNAL, "%s: the device failed after the cell's work", c->id ? c->id : "cell");
		sb_backend_close(be);
		finish(r, c);
	}
	return NULL;
}

int sb_multicell_run(const struct sb_mc_opts *o, struct sb_mc_cell *cells, int n, sb_mc_cell_fn fn,
		     struct sb_err *err)
{
	if (n <= 0)
		return 0;
	struct mc_run r;
	memset(&r, 0, sizeof r);
	r.o = o;
	r.cells = cells;
	r.n = n;
	r.fn = fn;
	pthread_mutex_init(&r.mu, NULL);
	for (int i = 0; i < n; i++)
		cells[i].status = SB_MC_PENDING;
	int nt = o->max_active > 0 && o->max_active < n ? o->max_active : n;
	pthread_t *th = calloc((size_t)nt, sizeof *th);
	if (!th)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int started = 0;
	for (int t = 0; t < nt; t++) {
		if (pthread_create(&th[t], NULL, worker, &r))
			break;
		started++;
	}
	if (!started)
		worker(&r);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	free(th);
	pthread_mutex_destroy(&r.mu);
	int nok = 0, ndev = 0, nfail = 0, first = -1;
	for (int i = 0; i < n; i++) {
		if (cells[i].status == SB_MC_OK)
			nok++;
		else if (cells[i].status == SB_MC_FAILED_DEVICE || cells[i].status == SB_MC_NOT_RUN)
			ndev++;
		else
			nfail++;
		if (cells[i].status != SB_MC_OK && first < 0)
			first = i;
	}
	if (ndev)
		return SB_ERR(err, SB_EINTERNAL, "%d of %d cells failed on the device (first: %s)", ndev, n,
			      cells[first].err.msg);
	if (nfail)
		return SB_ERR(err, cells[first].err.code ? cells[first].err.code : SB_EINTERNAL, "%d of %d cells failed (first: %s)",
			      nfail, n, cells[first].err.msg);
	return 0;
}

const char *sb_mc_status_name(enum sb_mc_status s)
{
	switch (s) {
	case SB_MC_OK:
		return "completed";
	case SB_MC_FAILED:
		return "failed";
	case SB_MC_FAILED_DEVICE:
	case SB_MC_NOT_RUN:
		return "failed_device";
	default:
		return "pending";
	}
}
