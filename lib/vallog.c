/* vallog.c — reading validation logs (see vallog.h). */
#include "vallog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "record.h"
#include "select.h"

static void cell_free(struct sb_val_cell *c)
{
	for (size_t i = 0; i < c->n_ep; i++)
		sb_json_free(c->ep[i].rec);
	free(c->ep);
	sb_json_free(c->done);
	free(c->cell_id);
	free(c->task);
	free(c->method);
	free(c->tier);
	free(c->arch);
}

void sb_vallog_free(struct sb_vallog *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n_cells; i++)
		cell_free(&v->cells[i]);
	free(v->cells);
	free(v->path);
	memset(v, 0, sizeof *v);
}

/* A number that may be null (non-finite values are written as null). */
static int opt_num(const struct sb_json *rec, const char *key, double *out, struct sb_err *err)
{
	const struct sb_json *x = sb_json_get(rec, key);
	if (!x)
		return SB_ERR(err, SB_EDATA, "missing field '%s'", key);
	if (x->type == SB_JSON_NULL) {
		*out = NAN;
		return 0;
	}
	if (x->type != SB_JSON_NUMBER)
		return SB_ERR(err, SB_EDATA, "field '%s' must be a number or null", key);
	*out = x->number;
	return 0;
}

static int req_hash(const struct sb_json *rec, const char *key, char out[SB_SHA256_HEX], struct sb_err *err)
{
	const char *s;
	SB_TRY(sb_json_req_str(rec, key, &s, err));
	if (!sb_is_sha256_hex(s))
		return SB_ERR(err, SB_EDATA, "field '%s' is not a SHA-256 hex digest", key);
	memcpy(out, s, SB_SHA256_HEX);
	return 0;
}

struct ident {
	const char *cell_id, *task, *method, *tier, *arch;
	int64_t seed;
};

static int read_ident(const struct sb_json *rec, struct ident *id, struct sb_err *err)
{
	SB_TRY(sb_json_req_str(rec, "cell_id", &id->cell_id, err));
	SB_TRY(sb_json_req_str(rec, "task", &id->task, err));
	SB_TRY(sb_json_req_str(rec, "method", &id->method, err));
	SB_TRY(sb_json_req_str(rec, "tier", &id->tier, err));
	SB_TRY(sb_json_req_str(rec, "arch", &id->arch, err));
	SB_TRY(sb_json_req_int(rec, "seed", &id->seed, err));
	return 0;
}

/* the cell of this identity, created when new; SB_EDATA when the cell_id is
 * known with other task/method/seed/tier/arch */
static int find_cell(struct sb_vallog *v, const struct ident *id, struct sb_val_cell **out, struct sb_err *err)
{
	for (size_t i = 0; i < v->n_cells; i++) {
		struct sb_val_cell *c = &v->cells[i];
		if (strcmp(c->cell_id, id->cell_id) != 0)
			continue;
		if (strcmp(c->task, id->task) || strcmp(c->method, id->method) || strcmp(c->tier, id->tier) ||
		    strcmp(c->arch, id->arch) || c->seed != id->seed)
			return SB_ERR(err, SB_EDATA,
			              "cell %s: task, method, seed, tier or arch differ from its earlier records",
			              id->cell_id);
		*out = c;
		return 0;
	}
	struct sb_val_cell *nc = realloc(v->cells, (v->n_cells + 1) * sizeof *nc);
	if (!nc)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	v->cells = nc;
	struct sb_val_cell *c = &v->cells[v->n_cells++];
	memset(c, 0, sizeof *c);
	c->seed = id->seed;
	c->cell_id = strdup(id->cell_id);
	c->task = strdup(id->task);
	c->method = strdup(id->method);
	c->tier = strdup(id->tier);
	c->arch = strdup(id->arch);
	if (!c->cell_id || !c->task || !c->method || !c->tier || !c->arch)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	c->epochs = -1;
	c->epochs_evaluated = -1;
	*out = c;
	return 0;
}

/* rec is consumed (owned by the log afterwards, or freed) */
static int take_record(struct sb_vallog *v, struct sb_json *rec, struct sb_err *err)
{
	const char *kind;
	int64_t ver;
	int rc = sb_record_kind(rec, &kind, &ver, err);
	if (rc)
		goto drop;
	int is_epoch = strcmp(kind, "eval.epoch") == 0, is_done = strcmp(kind, "eval.done") == 0;
	if (!is_epoch && !is_done)
		goto drop; /* run.meta and unknown kinds pass */
	if (ver != 1) {
		rc = SB_ERR(err, SB_EDATA, "%s record of version %lld (this program reads version 1)", kind,
		            (long long)ver);
		goto drop;
	}
	struct ident id;
	struct sb_val_cell *c = NULL;
	if ((rc = read_ident(rec, &id, err)) || (rc = find_cell(v, &id, &c, err)))
		goto drop;
	if (is_done) {
		if (c->done) {
			rc = SB_ERR(err, SB_EDATA, "cell %s: a second eval.done", c->cell_id);
			goto drop;
		}
		if ((rc = sb_json_req_int(rec, "epochs", &c->epochs, err)) ||
		    (rc = sb_json_req_int(rec, "epochs_evaluated", &c->epochs_evaluated, err)) ||
		    (rc = sb_json_req_str(rec, "train_status", &c->train_status, err)))
			goto drop;
		if (c->epochs < 1 || c->epochs_evaluated < 0 || c->epochs_evaluated > c->epochs) {
			rc =
			    SB_ERR(err, SB_EDATA, "cell %s: eval.done epochs %lld / epochs_evaluated %lld out of range",
			           c->cell_id, (long long)c->epochs, (long long)c->epochs_evaluated);
			goto drop;
		}
		c->done = rec;
		return 0;
	}
	if (c->done) {
		rc = SB_ERR(err, SB_EDATA, "cell %s: eval.epoch after eval.done", c->cell_id);
		goto drop;
	}
	struct sb_val_epoch e = {0};
	e.rec = rec;
	if ((rc = sb_json_req_int(rec, "epoch", &e.epoch, err)) ||
	    (rc = sb_json_req_int(rec, "epochs_completed", &e.epochs_completed, err)) ||
	    (rc = sb_json_req_int(rec, "n_val", &e.n_val, err)) ||
	    (rc = opt_num(rec, "val_accuracy", &e.val_accuracy, err)) ||
	    (rc = opt_num(rec, "val_macro_f1", &e.val_macro_f1, err)) ||
	    (rc = opt_num(rec, "val_loss", &e.val_loss, err)) ||
	    (rc = req_hash(rec, "checkpoint_sha256", e.checkpoint_sha256, err)) ||
	    (rc = req_hash(rec, "correct_sha256", e.correct_sha256, err)) ||
	    (rc = sb_json_req_str(rec, "correct_bits", &e.correct_bits, err)))
		goto drop;
	if (e.epoch < 0 || e.epochs_completed != e.epoch + 1) {
		rc = SB_ERR(err, SB_EDATA, "epoch %lld with epochs_completed %lld (must be epoch + 1)",
		            (long long)e.epoch, (long long)e.epochs_completed);
		goto drop;
	}
	if (!isnan(e.val_accuracy) && !(e.val_accuracy >= 0 && e.val_accuracy <= 1)) {
		rc = SB_ERR(err, SB_EDATA, "val_accuracy %g outside [0, 1]", e.val_accuracy);
		goto drop;
	}
	/* insert keeping ascending epochs; a repeated epoch is an error */
	size_t pos = c->n_ep;
	while (pos > 0 && c->ep[pos - 1].epoch > e.epoch)
		pos--;
	if (pos > 0 && c->ep[pos - 1].epoch == e.epoch) {
		rc = SB_ERR(err, SB_EDATA, "cell %s: epoch %lld appears twice", c->cell_id, (long long)e.epoch);
		goto drop;
	}
	if (c->n_ep == c->cap_ep) {
		size_t cap = c->cap_ep ? 2 * c->cap_ep : 32;
		struct sb_val_epoch *ne = realloc(c->ep, cap * sizeof *ne);
		if (!ne) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			goto drop;
		}
		c->ep = ne;
		c->cap_ep = cap;
	}
	memmove(c->ep + pos + 1, c->ep + pos, (c->n_ep - pos) * sizeof *c->ep);
	c->ep[pos] = e;
	c->n_ep++;
	return 0;
drop:
	sb_json_free(rec);
	return rc;
}

int sb_vallog_parse(const char *buf, size_t len, const char *path, struct sb_vallog *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->path = strdup(path);
	if (!out->path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	FILE *f = fmemopen((void *)buf, len ? len : 1, "rb");
	if (!f) {
		sb_vallog_free(out);
		return SB_ERRNO(err, path);
	}
	if (len == 0) { /* fmemopen refuses size 0: read nothing */
		fclose(f);
		return 0;
	}
	struct sb_ndjson_reader *r = sb_ndjson_open_file(f, path, 0);
	if (!r) {
		fclose(f);
		sb_vallog_free(out);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int rc = 0;
	for (;;) {
		struct sb_json *rec;
		if ((rc = sb_ndjson_next(r, &rec, err)))
			break;
		if (!rec)
			break;
		if ((rc = take_record(out, rec, err))) {
			sb_err_prefix(err, "%s:%ld", path, sb_ndjson_line(r));
			break;
		}
	}
	sb_ndjson_close(r);
	fclose(f);
	/* whole-cell checks */
	for (size_t i = 0; !rc && i < out->n_cells; i++) {
		struct sb_val_cell *c = &out->cells[i];
		if (c->done && c->epochs_evaluated >= 0 && (size_t)c->epochs_evaluated != c->n_ep)
			rc = SB_ERR(err, SB_EDATA, "%s: cell %s: eval.done says %lld epochs evaluated, the log has %zu",
			            path, c->cell_id, (long long)c->epochs_evaluated, c->n_ep);
		for (size_t k = 0; !rc && k < c->n_ep; k++)
			if (c->done && c->epochs > 0 && c->ep[k].epochs_completed > c->epochs)
				rc = SB_ERR(err, SB_EDATA, "%s: cell %s: epoch %lld beyond the budget of %lld epochs",
				            path, c->cell_id, (long long)c->ep[k].epoch, (long long)c->epochs);
	}
	if (rc)
		sb_vallog_free(out);
	return rc;
}

int sb_vallog_read(const char *path, struct sb_vallog *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	double mtime;
	SB_TRY(sb_file_mtime(path, &mtime, err));
	struct stat st; /* a FIFO would block the read, a device might never end it */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return SB_ERR(err, SB_EIO, "%s: not a regular file", path);
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 0, err));
	int rc = sb_vallog_parse(buf, n, path, out, err);
	if (!rc) {
		sb_sha256_buf(buf, n, out->sha256);
		out->size_bytes = n;
		out->mtime = mtime;
	}
	free(buf);
	return rc;
}

const struct sb_val_epoch *sb_val_cell_epoch(const struct sb_val_cell *c, int64_t epochs_completed)
{
	for (size_t i = 0; i < c->n_ep; i++)
		if (c->ep[i].epochs_completed == epochs_completed)
			return &c->ep[i];
	return NULL;
}

int sb_val_cell_value(const struct sb_val_cell *c, int patience, int64_t budget, double *acc, int64_t *epoch,
                      struct sb_err *err)
{
	if (budget > 0) {
		const struct sb_val_epoch *e = sb_val_cell_epoch(c, budget);
		if (!e)
			return SB_ERR(err, SB_EDATA, "cell %s has no validation record after %lld epochs", c->cell_id,
			              (long long)budget);
		if (isnan(e->val_accuracy))
			return SB_ERR(err, SB_EDATA, "cell %s: validation accuracy after %lld epochs is not a number",
			              c->cell_id, (long long)budget);
		*acc = e->val_accuracy;
		*epoch = e->epoch;
		return 0;
	}
	if (c->n_ep == 0)
		return SB_ERR(err, SB_EDATA, "cell %s has no validation records", c->cell_id);
	double *a = malloc(c->n_ep * sizeof *a);
	if (!a)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < c->n_ep; i++) {
		if (c->ep[i].epoch != (int64_t)i) {
			free(a);
			return SB_ERR(err, SB_EDATA, "cell %s lacks the validation record of epoch %zu", c->cell_id, i);
		}
		a[i] = c->ep[i].val_accuracy;
	}
	int best;
	struct sb_err e2 = {0};
	int rc = sb_select_best_epoch(a, (int)c->n_ep, patience, &best, NULL, &e2);
	free(a);
	if (rc)
		return SB_ERR(err, rc, "cell %s: %s", c->cell_id, e2.msg);
	*acc = c->ep[best].val_accuracy;
	*epoch = best;
	return 0;
}
