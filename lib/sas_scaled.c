/* sas_scaled.c — the scaled SAS comparison (see sas_scaled.h). */
#include "sas_scaled.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "io.h"
#include "lm_data.h"
#include "lm_eval.h"
#include "lm_import.h"
#include "lm_mask.h"
#include "lm_probe.h"
#include "lm_train.h"
#include "record.h"
#include "rng.h"
#include "sas_lm.h"
#include "sas_run.h"
#include "stats.h"
#include "tokenizer.h"

/* ---------------------------------------------------------------- the cell */

int sb_sas_id_ok(const char *id, size_t len)
{
	return len > 0 && strlen(id) == len && !strchr(id, '/') && strcmp(id, ".") && strcmp(id, "..");
}

static int str_field(const struct sb_json *v, const char *k, char *dst, size_t cap, struct sb_err *err)
{
	if (v->type != SB_JSON_STRING || !v->len || v->len >= cap)
		return SB_ERR(err, SB_EDATA, "field '%s': a non-empty string expected", k);
	memcpy(dst, v->text, v->len + 1);
	return 0;
}

/* Each mask of the list runs at the cell's budget (PROTOCOL C: controls at matched budget,
 * row by row): a mask written without numbers takes the budget recipe's s, w, k; one with
 * numbers must have exactly those (else bad input naming both). With out, the mask of
 * spec t is parsed into *out; with out NULL the whole list is checked. */
static int mask_at_budget(const char *t, const struct sb_lm_mask *bud, struct sb_lm_mask *out, struct sb_err *err)
{
	if (!out) {
		char *dup = strdup(t), *save = NULL;
		if (!dup)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		int rc = 0, n = 0;
		struct sb_lm_mask m;
		char names[SB_SAS_SCALED_MAXMASK][64];
		for (char *u = strtok_r(dup, ";", &save); u && !rc; u = strtok_r(NULL, ";", &save)) {
			rc = mask_at_budget(u, bud, &m, err);
			if (!rc && m.kind == SB_LM_MASK_DENSE)
				continue; /* evaluated first anyway, and takes no place (sb_sas_scaled_eval) */
			/* each one is evaluated (sb_sas_scaled_eval): none the kernel cannot run, no more than fit */
			if (!rc && m.kind == SB_LM_MASK_H2O)
				rc = SB_ERR(err, SB_EDATA,
				            "field 'masks': '%s' needs accumulated attention, not supported here", u);
			if (!rc && n == SB_SAS_SCALED_MAXMASK)
				rc = SB_ERR(err, SB_EDATA, "field 'masks': at most %d masks", SB_SAS_SCALED_MAXMASK);
			if (rc)
				break;
			/* each once: its records are named by the mask (at the budget), as blocks and tasks */
			sb_lm_mask_name(&m, names[n], sizeof names[n]);
			for (int i = 0; i < n && !rc; i++)
				if (!strcmp(names[i], names[n]))
					rc = SB_ERR(err, SB_EDATA, "field 'masks': '%s' given twice (as %s)", u, names[n]);
			n++;
		}
		free(dup);
		return rc;
	}
	SB_TRY(sb_lm_mask_parse(t, out, err));
	if (out->kind == SB_LM_MASK_DENSE)
		return 0;
	if (!strchr(t, ':')) {
		out->sinks = bud->sinks;
		out->window = bud->window;
		out->topk = bud->topk;
	} else if (!sb_lm_mask_same_params(out, bud)) {
		char b[64];
		return SB_ERR(err, SB_EDATA,
		              "field 'masks': '%s' does not run at the cell's budget '%s' (give it no numbers, or the "
		              "budget's s, w, k)",
		              t, sb_lm_mask_name(bud, b, sizeof b));
	}
	return 0;
}

int sb_sas_scaled_parse(struct sb_sas_scaled *c, const struct sb_json *obj, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	int b[] = {8, 16, 64};
	c->n_blocks = 3;
	memcpy(c->blocks, b, sizeof b);
	c->dsel = 32;
	c->sel_steps = 150;
	c->sel_batch = 8;
	c->sel_lr = 1e-3f;
	c->sel_wd = 0.01f;
	c->sel_clip = 1.0f;
	c->windows = 16;
	c->probes = 6;
	c->untrained = 1;
	c->nogate = 1;
	int tasks[] = {SB_LM_NIAH_SINGLE_1,   SB_LM_NIAH_SINGLE_2,   SB_LM_NIAH_SINGLE_3,
		       SB_LM_NIAH_MULTIKEY_1, SB_LM_NIAH_MULTIKEY_2, SB_LM_NIAH_MULTIKEY_3};
	c->n_tasks = 6;
	memcpy(c->tasks, tasks, sizeof tasks);
	snprintf(c->masks, sizeof c->masks, "recipe;block16;block64");
	snprintf(c->budget, sizeof c->budget, "recipe");
	int have_seed = 0;
	for (size_t i = 0; i < obj->n; i++) {
		const char *k = obj->keys[i];
		const struct sb_json *v = obj->items[i];
		int rc = 0;
		if (!strcmp(k, "family"))
			continue;
		else if (!strcmp(k, "id")) {
			rc = str_field(v, k, c->cell_id, sizeof c->cell_id, err);
			if (!rc && !sb_sas_id_ok(c->cell_id, v->len))
				rc = SB_ERR(err, SB_EDATA, "field 'id': a directory name expected (no '/', not '.' or '..')");
		} else if (!strcmp(k, "backbone"))
			rc = str_field(v, k, c->backbone, sizeof c->backbone, err);
		else if (!strcmp(k, "seed")) {
			int64_t s;
			if (sb_json_int64(v, &s) || s < 0)
				rc = SB_ERR(err, SB_EDATA, "field 'seed': a non-negative integer expected");
			c->seed = (uint64_t)s;
			have_seed = 1;
		} else if (!strcmp(k, "blocks") || !strcmp(k, "tasks")) {
			int is_b = k[0] == 'b';
			if (v->type != SB_JSON_ARRAY || v->n < 1 ||
			    v->n > (is_b ? SB_SAS_SCALED_MAXB : SB_SAS_SCALED_MAXTASK))
				rc = SB_ERR(err, SB_EDATA, "field '%s': a non-empty array (at most %d) expected", k,
				            is_b ? SB_SAS_SCALED_MAXB : SB_SAS_SCALED_MAXTASK);
			for (size_t j = 0; j < v->n && !rc; j++) {
				if (is_b) {
					rc = sb_sas_field_int(v->items[j], k, 1, 4096, &c->blocks[j], err);
				} else {
					int t = sb_lm_task_parse(sb_json_str(v->items[j], ""));
					if (t < 0 || t >= SB_LM_NTASKS)
						rc = SB_ERR(err, SB_EDATA, "field 'tasks': unknown battery task '%s'",
						            sb_json_str(v->items[j], "?"));
					c->tasks[j] = t;
				}
				for (size_t i = 0; i < j && !rc; i++) /* each once: one run, one record name */
					if (is_b ? c->blocks[i] == c->blocks[j] : c->tasks[i] == c->tasks[j])
						rc = SB_ERR(err, SB_EDATA, "field '%s': %s given twice", k,
						            is_b ? "a block size" : "a task");
			}
			if (is_b)
				c->n_blocks = (int)v->n;
			else
				c->n_tasks = (int)v->n;
		} else if (!strcmp(k, "dsel"))
			rc = sb_sas_field_int(v, k, 1, 1024, &c->dsel, err);
		else if (!strcmp(k, "sel_steps"))
			rc = sb_sas_field_int(v, k, 0, 1000000, &c->sel_steps, err);
		else if (!strcmp(k, "sel_batch"))
			rc = sb_sas_field_int(v, k, 1, 1024, &c->sel_batch, err);
		else if (!strcmp(k, "windows"))
			rc = sb_sas_field_int(v, k, 1, 100000, &c->windows, err);
		else if (!strcmp(k, "probes"))
			rc = sb_sas_field_int(v, k, 0, 100000, &c->probes, err);
		else if (!strcmp(k, "untrained"))
			rc = sb_sas_field_int(v, k, 0, 1, &c->untrained, err);
		else if (!strcmp(k, "nogate"))
			rc = sb_sas_field_int(v, k, 0, 1, &c->nogate, err);
		else if (!strcmp(k, "sel_lr"))
			rc = sb_sas_field_num(v, k, &c->sel_lr, err);
		else if (!strcmp(k, "sel_wd"))
			rc = sb_sas_field_num(v, k, &c->sel_wd, err);
		else if (!strcmp(k, "sel_clip"))
			rc = sb_sas_field_num(v, k, &c->sel_clip, err);
		else if (!strcmp(k, "masks"))
			rc = str_field(v, k, c->masks, sizeof c->masks, err);
		else if (!strcmp(k, "budget"))
			rc = str_field(v, k, c->budget, sizeof c->budget, err);
		else
			rc = SB_ERR(err, SB_EDATA, "unknown field '%s' in a scaled SAS cell", k);
		if (rc)
			return rc;
	}
	if (!c->backbone[0])
		return SB_ERR(err, SB_EDATA, "missing field 'backbone'");
	if (!have_seed)
		return SB_ERR(err, SB_EDATA, "missing field 'seed'");
	struct sb_lm_mask mk;
	SB_TRY(sb_lm_mask_parse(c->budget, &mk, err));
	if (mk.kind != SB_LM_MASK_RECIPE)
		return SB_ERR(err, SB_EDATA, "field 'budget': a recipe (\"recipe[:s=..,w=..,k=..]\") expected");
	SB_TRY(mask_at_budget(c->masks, &mk, NULL, err));
	if (!c->cell_id[0])
		snprintf(c->cell_id, sizeof c->cell_id, "sas-scaled-s%llu", (unsigned long long)c->seed);
	return 0;
}

void sb_sas_scaled_json(struct sb_jw *w, const struct sb_sas_scaled *c)
{
	sb_jw_obj(w);
	sb_jw_kstr(w, "family", "sas");
	sb_jw_kstr(w, "id", c->cell_id);
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	sb_jw_kstr(w, "backbone", c->backbone);
	sb_jw_key(w, "blocks");
	sb_jw_arr(w);
	for (int i = 0; i < c->n_blocks; i++)
		sb_jw_int(w, c->blocks[i]);
	sb_jw_arr_end(w);
	sb_jw_kint(w, "dsel", c->dsel);
	sb_jw_kint(w, "sel_steps", c->sel_steps);
	sb_jw_kint(w, "sel_batch", c->sel_batch);
	sb_jw_kf32(w, "sel_lr", c->sel_lr);
	sb_jw_kf32(w, "sel_wd", c->sel_wd);
	sb_jw_kf32(w, "sel_clip", c->sel_clip);
	sb_jw_kint(w, "windows", c->windows);
	sb_jw_kint(w, "probes", c->probes);
	sb_jw_kint(w, "untrained", c->untrained);
	sb_jw_kint(w, "nogate", c->nogate);
	sb_jw_key(w, "tasks");
	sb_jw_arr(w);
	for (int i = 0; i < c->n_tasks; i++)
		sb_jw_str(w, sb_lm_task_name(c->tasks[i]));
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "masks", c->masks);
	sb_jw_kstr(w, "budget", c->budget);
	sb_jw_obj_end(w);
}

/* The SHA-256 of the cell as cell.json holds it (sb_sas_scaled_json, without the newline), as
 * the toy's (lib/sas_run.c): in each selector's metadata, so that sb-eval refuses a cell.json
 * edited after training in any field (budget, windows, masks, ...: the same cell_id, block and
 * backbone would not notice) and sb-train does not take a selector another cell of the same id
 * left in the run directory for this cell's. */
static int cell_hash(const struct sb_sas_scaled *c, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_sas_scaled_json(&w, c);
	int oom = w.oom;
	if (!oom)
		sb_sha256_buf(w.buf, w.len, hex);
	sb_jw_free(&w);
	return oom ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
}

/* RUN_DIR/selector-bB.safetensors is the file a sas.scaled.block record names (its SHA-256
 * want) and was trained for the cell of hash cell_sha (its metadata's cell_sha256) */
static int selector_is(const char *run_dir, int block, const char *want, const char *cell_sha)
{
	char path[4400], hex[SB_SHA256_HEX];
	struct sb_err e = {0};
	snprintf(path, sizeof path, "%s/selector-b%d.safetensors", run_dir, block);
	if (!want[0] || sb_sha256_file(path, hex, NULL, &e) || strcmp(hex, want))
		return 0;
	struct sb_tensors meta;
	const char *mh;
	int ok =
	    !sb_st_read_meta(path, &meta, &e) && (mh = sb_tensors_meta(&meta, "cell_sha256")) && !strcmp(mh, cell_sha);
	sb_tensors_free(&meta);
	return ok;
}

int sb_sas_scaled_finished(const struct sb_sas_scaled *c, const char *runs_dir)
{
	char run_dir[4200], path[4400], cell_sha[SB_SHA256_HEX], hex[SB_SHA256_HEX], bsha[SB_SHA256_HEX] = "";
	struct sb_err e = {0};
	char *buf = NULL;
	size_t n = 0;
	int finished = 0, last_done = 0, seen[SB_SAS_SCALED_MAXB] = {0};
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_sas_scaled_json(&w, c);
	snprintf(run_dir, sizeof run_dir, "%s/%s", runs_dir, c->cell_id);
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	/* a scaled id is given, not a hash of the cell: the file is compared, byte for byte */
	if (w.oom || sb_read_file(path, &buf, &n, 1 << 20, &e) || n != w.len + 1 || memcmp(buf, w.buf, w.len) ||
	    buf[w.len] != '\n')
		goto out;
	sb_sha256_buf(w.buf, w.len, cell_sha);
	/* train.ndjson ends in sas.scaled.done, and each block size's selector is the one its
	 * sas.scaled.block record names, trained for this cell: an interrupted retrain of an edited
	 * cell (same id) leaves the new cell.json beside the previous cell's train.ndjson and
	 * selectors, some of them perhaps already overwritten */
	struct sb_ndjson_reader *rd;
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	if (sb_ndjson_open(path, &rd, &e))
		goto out;
	for (;;) {
		struct sb_json *v = NULL;
		if (sb_ndjson_next(rd, &v, &e)) {
			last_done = 0;
			break;
		}
		if (!v)
			break;
		const char *kind = sb_json_str(sb_json_get(v, "kind"), "");
		last_done = !strcmp(kind, "sas.scaled.done");
		if (last_done)
			snprintf(bsha, sizeof bsha, "%s", sb_json_str(sb_json_get(v, "backbone_sha256"), ""));
		int64_t B;
		if (!strcmp(kind, "sas.scaled.block") && !sb_json_int64(sb_json_get(v, "block"), &B))
			for (int i = 0; i < c->n_blocks; i++)
				if (c->blocks[i] == B)
					seen[i] =
					    selector_is(run_dir, c->blocks[i],
					                sb_json_str(sb_json_get(v, "selector_sha256"), ""), cell_sha);
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	finished = last_done;
	for (int i = 0; i < c->n_blocks; i++)
		finished = finished && seen[i];
	/* and on the backbone as it is now (its sidecar, which sb-eval checks the checkpoint
	 * against): selectors of a backbone retrained since are refused by sb-eval, so the cell
	 * trains again */
	snprintf(path, sizeof path, "%s/model.safetensors", c->backbone);
	finished = finished && !sb_sidecar_read(path, hex, &e) && !strcmp(hex, bsha);
out:
	free(buf);
	sb_jw_free(&w);
	return finished;
}

/* ---------------------------------------------------------------- shared */

struct backbone {
	struct sb_backend *be;
	struct sb_lm_cell cell;
	struct sb_lm_model *m;
	char sha[65];
	struct sb_tok *tok; /* the run's tokenizer (an import's tokenizer.json); NULL: bytes are ids */
};

static int open_backbone(const char *dir, struct backbone *b, struct sb_err *err)
{
	memset(b, 0, sizeof *b);
	SB_TRY(sb_backend_open("cpu", 1, &b->be, err));
	int rc = sb_lm_run_open(b->be, dir, 0, &b->cell, &b->m, b->sha, err);
	/* a backbone whose ids are a tokenizer's (an import with tokenizer.json): every text is
	 * tokenized by it (training samples, fidelity windows, probes); checked against cell.json
	 * and the model's vocabulary */
	if (!rc && b->cell.tokenizer[0]) {
		rc = sb_lm_run_tokenizer(dir, &b->cell, b->m->cfg.vocab, &b->tok, err);
		if (rc) {
			sb_lm_model_free(b->m);
			b->m = NULL;
		}
	}
	if (rc) {
		sb_backend_close(b->be);
		b->be = NULL;
	}
	return rc;
}

/* Every byte of a corpus part within the backbone's vocabulary: bytes are its ids, and an
 * import without tokenizer.json may have fewer than 256 (a byte past them would index past
 * the embedding and the logits rows) */
static int corpus_fits(const struct sb_lm_corpus *c, int V, struct sb_err *err)
{
	for (size_t i = 0; V < 256 && i < c->n; i++)
		if (c->bytes[i] >= V)
			return SB_ERR(err, SB_EDATA,
			              "%s: byte %d at offset %zu of its %s part is outside the backbone's vocabulary (%d ids; "
			              "its ids are bytes)",
			              c->path, c->bytes[i], c->offset + i, c->split, V);
	return 0;
}

static void close_backbone(struct backbone *b)
{
	sb_tok_free(b->tok);
	sb_lm_model_free(b->m);
	sb_backend_close(b->be);
}

/* A text as the backbone's ids: its tokenizer's, or its bytes (checked by corpus_fits) */
static int text_ids(const struct backbone *b, const uint8_t *text, size_t n, int32_t **ids, size_t *nids,
                    struct sb_err *err)
{
	if (b->tok) { /* a piece of a text (a valid part, a mixture's window): whole characters */
		size_t beg, end;
		sb_tok_utf8_edges(text, n, &beg, &end);
		return sb_tok_encode(b->tok, (const char *)text + beg, end - beg, ids, nids, err);
	}
	if (!(*ids = malloc((n ? n : 1) * sizeof **ids)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < n; i++)
		(*ids)[i] = text[i];
	*nids = n;
	return 0;
}

/* Bytes per token of a text under the backbone's tokenizer (its first 64 KB; 1 for bytes) */
static int bytes_per_token(const struct backbone *b, const struct sb_lm_corpus *c, double *bpt, struct sb_err *err)
{
	*bpt = 1;
	if (!b->tok || !c->n)
		return 0;
	size_t n = c->n < 65536 ? c->n : 65536, k = 0;
	int32_t *ids = NULL;
	SB_TRY(text_ids(b, c->bytes, n, &ids, &k, err));
	free(ids);
	if (k)
		*bpt = (double)n / (double)k;
	return 0;
}

/* Training example `index` in the backbone's ids: T+1 of them. Bytes: the mixture's example of
 * T+1 bytes. A tokenizer: an example of about 1.3 (T+1) tokens' bytes (bpt) is drawn from the
 * mixture (made for up to mix->T bytes) and tokenized, and its last T+1 ids kept (a retrieval
 * example ends with its query and answer); one that gives fewer is drawn 1.5 times longer. */
static int sample_ids(const struct backbone *b, const struct sb_lm_mix *mix, uint64_t index, int T, double bpt,
                      uint8_t *buf, int32_t *out, struct sb_err *err)
{
	if (!b->tok) {
		SB_TRY(sb_lm_mix_sample(mix, index, buf, NULL, err));
		for (int t = 0; t <= T; t++)
			out[t] = buf[t];
		return 0;
	}
	double want = 1.3 * bpt * (T + 1) + 8;
	for (int attempt = 0; attempt < 8; attempt++, want *= 1.5) {
		int Tb = want > mix->T ? mix->T : (int)want;
		SB_TRY(sb_lm_mix_sample_len(mix, index, Tb, buf, NULL, err));
		int32_t *ids = NULL, bos = sb_tok_bos(b->tok);
		size_t k = 0, nb = sb_tok_utf8_clean(buf, (size_t)Tb + 1, buf);
		size_t want_k = (size_t)T + (bos < 0); /* after the tokenizer's BOS, as HF encodes a sequence */
		SB_TRY(text_ids(b, buf, nb, &ids, &k, err));
		if (k >= want_k) {
			if (bos >= 0)
				out[0] = bos;
			memcpy(out + (bos >= 0), ids + (k - want_k), want_k * sizeof *out);
		}
		free(ids);
		if (k >= want_k)
			return 0;
		if (Tb == mix->T)
			break;
	}
	return SB_ERR(err, SB_EDATA, "training example %llu: %d bytes of the mixture give fewer than %d tokens",
	              (unsigned long long)index, mix->T + 1, T + 1);
}

/* The inputs of a probe's turns: turn k's ids (a tokenizer's) or bytes, fed before its
 * answer is decoded: the first turn's prompt (after the tokenizer's BOS, as HF encodes a
 * sequence), then for each later turn the newline that ended the previous answer and the
 * turn's prompt, as the LM track's evaluation feeds them (lib/lm_eval.c). */
struct turn_in {
	int32_t *ids[SB_LM_PROBE_MAXTURN];
	int n[SB_LM_PROBE_MAXTURN];
};

static void turn_in_free(struct turn_in *ti)
{
	for (int k = 0; k < SB_LM_PROBE_MAXTURN; k++)
		free(ti->ids[k]);
	memset(ti, 0, sizeof *ti);
}

/* The turns' inputs of probe p: in tokens with a tokenizer, else its bytes as ids */
static int turn_inputs(const struct backbone *b, const struct sb_lm_probe *p, struct turn_in *ti, struct sb_err *err)
{
	memset(ti, 0, sizeof *ti);
	for (int k = 0; k < p->n_turns; k++) {
		int beg = p->prompt_beg[k], plen = p->answer_beg[k] - beg;
		uint8_t *txt = malloc((size_t)plen + 2);
		if (!txt) {
			turn_in_free(ti);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		txt[0] = '\n';
		memcpy(txt + 1, p->text + beg, (size_t)plen);
		const uint8_t *in = k ? txt : txt + 1;
		size_t nin = (size_t)plen + (k ? 1 : 0), n = 0;
		int rc = 0;
		if (b->tok)
			rc = sb_tok_encode_clean(b->tok, in, nin, !k, &ti->ids[k], &n, err);
		else if (!(ti->ids[k] = malloc((nin ? nin : 1) * sizeof *ti->ids[k])))
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else
			for (n = 0; n < nin; n++)
				ti->ids[k][n] = in[n];
		free(txt);
		if (rc) {
			turn_in_free(ti);
			return rc;
		}
		ti->n[k] = (int)n;
	}
	return 0;
}

/* A retrieval probe for a backbone with a tokenizer: its text made in bytes (the battery's
 * generator) at about 0.85 T tokens (bpt: the haystack's bytes per token), its turns'
 * inputs tokenized (turn_inputs); made again 15% shorter while the turns' tokens and their
 * answers' bytes (a bound on their tokens) exceed T (at most 12 times). */
static int token_probe(const struct backbone *b, int task, int T, const struct sb_lm_corpus *hay, uint64_t seed,
                       int pi, double depth, double bpt, struct sb_lm_probe *p, struct turn_in *ti,
                       struct sb_err *err)
{
	double len = 0.85 * T * bpt;
	for (int attempt = 0; attempt < 12; attempt++, len *= 0.85) {
		int L = len > (double)hay->n ? (int)hay->n : (int)len;
		if (L < sb_lm_task_min_len(task))
			L = sb_lm_task_min_len(task);
		SB_TRY(sb_lm_probe_make(task, L, hay->bytes, hay->n, seed, SB_RNG_SYNTH, (uint64_t)pi, depth, p, err));
		int rc = turn_inputs(b, p, ti, err), total = 0;
		if (rc) {
			sb_lm_probe_free(p);
			return rc;
		}
		for (int k = 0; k < p->n_turns; k++)
			total += ti->n[k] + (p->answer_end[k] - p->answer_beg[k]);
		if (total <= T)
			return 0;
		turn_in_free(ti);
		sb_lm_probe_free(p);
		if (L <= sb_lm_task_min_len(task))
			break;
	}
	return SB_ERR(err, SB_EUSAGE, "probe %s #%d does not fit a context of %d tokens", sb_lm_task_name(task), pi, T);
}

static int write_text(const char *path, struct sb_jw *w, struct sb_err *err)
{
	char *text = malloc(w->len + 2);
	if (!text || w->oom) {
		free(text);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	memcpy(text, w->buf, w->len);
	text[w->len] = '\n';
	int rc = sb_write_file_atomic(path, text, w->len + 1, err);
	free(text);
	return rc;
}

static void lm_cfg_for(struct sb_sas_lm_cfg *sc, const struct sb_sas_scaled *c, int block, int batch)
{
	memset(sc, 0, sizeof *sc);
	sc->block = block;
	sc->dsel = c->dsel;
	sc->batch = batch;
	sb_lm_mask_parse(c->budget, &sc->budget, NULL);
}

/* ---------------------------------------------------------------- training */

int sb_sas_scaled_train(const struct sb_sas_scaled *c, const char *runs_dir, char *run_dir, sb_sas_scaled_progress fn,
                        void *arg, struct sb_err *err)
{
	snprintf(run_dir, 4096, "%s/%s", runs_dir, c->cell_id);
	char cell_sha[SB_SHA256_HEX]; /* in each selector's metadata */
	SB_TRY(cell_hash(c, cell_sha, err));
	/* the backbone, its corpora and the blocks against its T first: a cell refused
	 * for them leaves no run directory behind */
	struct backbone bb;
	SB_TRY(open_backbone(c->backbone, &bb, err));
	const struct sb_lm_cell *lc = &bb.cell;
	int T = lc->T, rc = 0;
	for (int bi = 0; bi < c->n_blocks && !rc; bi++)
		if (T % c->blocks[bi])
			rc = SB_ERR(err, SB_EDATA, "field 'blocks': %d does not divide the backbone's T %d", c->blocks[bi],
			            T);
	struct sb_lm_corpus corp[8];
	memset(corp, 0, sizeof corp);
	for (int i = 0; i < lc->n_corpora && !rc; i++) {
		rc = sb_lm_corpus_read(lc->corpora[i], "train", &corp[i], err);
		if (!rc && !bb.tok)
			rc = corpus_fits(&corp[i], bb.m->cfg.vocab, err);
	}
	/* with a tokenizer the mixture's examples are bytes to tokenize: up to 4 times the
	 * bytes of T+1 tokens of the first corpus (sample_ids) */
	double bpt = 1;
	if (!rc && lc->n_corpora > 0)
		rc = bytes_per_token(&bb, &corp[0], &bpt, err);
	int Tmix = bb.tok ? (int)(4 * bpt * (T + 1)) + 16 : T;
	/* the training mixture: the backbone's own; an import was never trained (its cell holds
	 * the LM track's default, retrieval alone), so an imported backbone's selector trains on
	 * its corpora's train parts (half, shared equally) and retrieval sequences (half), as a
	 * trained backbone's mixture mixes text and retrieval: the fidelity it is measured on is
	 * text */
	char mixspec[sizeof lc->mixture];
	snprintf(mixspec, sizeof mixspec, "%s", lc->mixture);
	if (!rc && lc->source[0]) {
		mixspec[0] = 0;
		size_t k = 0;
		for (int i = 0; i < lc->n_corpora && k < sizeof mixspec; i++)
			k += (size_t)snprintf(mixspec + k, sizeof mixspec - k, "%s=%.6g,", corp[i].name,
					      0.5 / lc->n_corpora);
		if (k < sizeof mixspec)
			k += (size_t)snprintf(mixspec + k, sizeof mixspec - k, "retrieval=0.5");
		if (k >= sizeof mixspec)
			rc = SB_ERR(err, SB_EDATA, "the imported backbone's corpora make a mixture longer than %zu bytes",
				    sizeof mixspec - 1);
	}
	struct sb_lm_mix mix;
	if (!rc)
		rc = sb_lm_mix_parse(&mix, mixspec, corp, lc->n_corpora, lc->haystack[0] ? lc->haystack : NULL,
		                     c->seed + 1000, Tmix, err);
	if (!rc && c->n_blocks > 0) { /* the backbone's training path (its layout may lack one): */
		struct sb_sas_lm_cfg sc; /* the first block's selector made and dropped */
		struct sb_sas_lm *x = NULL;
		lm_cfg_for(&sc, c, c->blocks[0], c->sel_batch);
		rc = sb_sas_lm_new(bb.m, &sc, T, c->seed, &x, err);
		sb_sas_lm_free(x);
	}
	if (!rc)
		rc = sb_mkdir_p(run_dir, err);
	char path[4200];
	if (!rc) {
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_sas_scaled_json(&w, c);
		snprintf(path, sizeof path, "%s/cell.json", run_dir);
		rc = write_text(path, &w, err);
		sb_jw_free(&w);
	}
	struct sb_atomic a;
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	if (!rc)
		rc = sb_atomic_open(&a, path, err);
	if (rc) {
		for (int i = 0; i < lc->n_corpora; i++)
			sb_lm_corpus_free(&corp[i]);
		close_backbone(&bb);
		return rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	char mp[4200];
	snprintf(mp, sizeof mp, "%s/model.safetensors", c->backbone);
	struct sb_input in = {.path = mp, .size_bytes = sb_file_size(mp)};
	memcpy(in.sha256, bb.sha, sizeof bb.sha);
	struct sb_run_meta meta = {.device = bb.be->device, .threads = 1, .inputs = &in, .n_inputs = 1};
	rc = sb_record_run_meta(&w, &meta, err);
	int32_t *batch = malloc((size_t)c->sel_batch * (T + 1) * sizeof *batch);
	uint8_t *buf = malloc((size_t)Tmix + 1);
	if ((!batch || !buf) && !rc)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int bi = 0; bi < c->n_blocks && !rc; bi++) {
		int B = c->blocks[bi];
		struct sb_sas_lm_cfg sc;
		lm_cfg_for(&sc, c, B, c->sel_batch);
		struct sb_sas_lm *x = NULL;
		rc = sb_sas_lm_new(bb.m, &sc, T, c->seed, &x, err);
		double t0 = sb_monotonic_seconds(), gsum = 0, first = 0, last = 0;
		for (int s = 1; s <= c->sel_steps && !rc; s++) {
			for (int k = 0; k < c->sel_batch && !rc; k++)
				rc = sample_ids(&bb, &mix, (uint64_t)(s - 1) * c->sel_batch + k, T, bpt, buf,
				                batch + (size_t)k * (T + 1), err);
			double loss = 0, gn = 0;
			if (!rc)
				rc = sb_sas_lm_step_ids(x, batch, s, c->sel_lr, c->sel_wd, c->sel_clip, &loss, &gn, err);
			if (rc)
				break;
			if (s == 1)
				first = loss;
			last = loss;
			gsum += gn;
			sb_jw_record(&w, "sas.scaled.step", 1);
			sb_jw_kint(&w, "block", B);
			sb_jw_kint(&w, "step", s);
			sb_jw_kf64(&w, "loss", loss);
			sb_jw_kf64(&w, "grad_norm", gn);
			sb_jw_kf64(&w, "gate_entropy", sb_sas_lm_gate_entropy(x));
			sb_jw_obj_end(&w);
			rc = sb_jw_line(&w, err);
			if (fn) {
				char what[32];
				snprintf(what, sizeof what, "selector b%d", B);
				fn(arg, what, s, c->sel_steps, loss);
			}
		}
		char sp[4200], sha[65] = "";
		snprintf(sp, sizeof sp, "%s/selector-b%d.safetensors", run_dir, B);
		if (!rc) {
			size_t n = sb_sas_lm_n_params(x);
			float *p = malloc(n * sizeof *p);
			struct sb_tensors ts;
			sb_tensors_init(&ts);
			int64_t shape[1] = {(int64_t)n};
			char v[32];
			if (!p)
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			else
				sb_sas_lm_params_get(x, p);
			if (!rc)
				rc = sb_tensors_add(&ts, "selector", SB_F32, 1, shape, p, 0, err);
			free(p);
			snprintf(v, sizeof v, "%d", B);
			if (!rc)
				rc = sb_tensors_set_meta(&ts, "block", v, err);
			if (!rc)
				rc = sb_tensors_set_meta(&ts, "format", "sparsebench.sas_scaled", err);
			if (!rc)
				rc = sb_tensors_set_meta(&ts, "backbone_sha256", bb.sha, err);
			if (!rc)
				rc = sb_tensors_set_meta(&ts, "cell_id", c->cell_id, err);
			if (!rc)
				rc = sb_tensors_set_meta(&ts, "cell_sha256", cell_sha, err);
			if (!rc)
				rc = sb_st_write(sp, &ts, err);
			sb_tensors_free(&ts);
			if (!rc)
				rc = sb_sha256_file(sp, sha, NULL, err);
			if (!rc)
				rc = sb_sidecar_write(sp, sha, err);
		}
		if (!rc) {
			sb_jw_record(&w, "sas.scaled.block", 1);
			sb_jw_kint(&w, "block", B);
			sb_jw_kint(&w, "steps", c->sel_steps);
			/* no step, no loss or gradient: null (they read 0) */
			sb_jw_kf64(&w, "loss_first", c->sel_steps ? first : NAN);
			sb_jw_kf64(&w, "loss_last", c->sel_steps ? last : NAN);
			sb_jw_kf64(&w, "selector_gradient_norm_mean", c->sel_steps ? gsum / c->sel_steps : NAN);
			sb_jw_kf64(&w, "seconds", sb_monotonic_seconds() - t0);
			sb_jw_kstr(&w, "selector", sp + strlen(run_dir) + 1);
			sb_jw_kstr(&w, "selector_sha256", sha);
			sb_jw_obj_end(&w);
			rc = sb_jw_line(&w, err);
		}
		sb_sas_lm_free(x);
	}
	if (!rc) {
		sb_jw_record(&w, "sas.scaled.done", 1);
		sb_jw_kstr(&w, "cell_id", c->cell_id);
		sb_jw_kstr(&w, "status", "completed");
		sb_jw_kstr(&w, "backbone_sha256", bb.sha);
		sb_jw_kint(&w, "T", T);
		sb_jw_kstr(&w, "ids", bb.tok ? "tokenizer" : "bytes");
		if (bb.tok)
			sb_jw_kf64(&w, "bytes_per_token", bpt);
		sb_jw_kstr(&w, "mixture", mixspec);
		sb_jw_obj_end(&w);
		rc = sb_jw_line(&w, err);
	}
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
	free(batch);
	free(buf);
	for (int i = 0; i < lc->n_corpora; i++)
		sb_lm_corpus_free(&corp[i]);
	close_backbone(&bb);
	return rc;
}

/* ---------------------------------------------------------------- evaluation */

#define MAXM (SB_SAS_SCALED_MAXMASK + 3 * SB_SAS_SCALED_MAXB + 1)

struct method {
	char name[64];
	enum sb_sas_lm_mode mode;
	struct sb_lm_mask mask;
	struct sb_sas_lm *x; /* SAS: the trained selector (owned) */
	int block;
	struct sb_lm_budget budget;
	double *kl, *top1, *nll, *kl_t, *top1_t, *nll_t; /* per window */
	uint8_t *correct;                                /* per probe */
};

/* A selector checkpoint of this run: its sidecar, then its metadata must name this
 * block, this backbone (SHA-256) and this cell, by id and by the hash of the whole cell as
 * cell_path now holds it (checkpoints written before 2026-12-02 carry no cell_id, and those
 * written before cell_sha256 was added no hash; the rest is checked for them too). */
static int load_selector(struct sb_sas_lm *x, const char *path, int block, const char *backbone_sha,
			 const char *cell_id, const char *cell_sha, const char *cell_path, struct sb_err *err)
{
	char sha[65];
	struct sb_tensors ts;
	SB_TRY(sb_st_read_checked(path, 1, sha, &ts, err));
	const struct sb_tensor *t = sb_tensors_find(&ts, "selector");
	size_t n = sb_sas_lm_n_params(x);
	int rc = 0;
	const char *mb = sb_tensors_meta(&ts, "block"), *ms = sb_tensors_meta(&ts, "backbone_sha256"),
		   *mc = sb_tensors_meta(&ts, "cell_id"), *mh = sb_tensors_meta(&ts, "cell_sha256");
	if (!mb || atoi(mb) != block)
		rc = SB_ERR(err, SB_EDATA, "%s: a selector for block %s, not %d", path, mb ? mb : "(none)", block);
	else if (!ms || strcmp(ms, backbone_sha))
		rc = SB_ERR(err, SB_EDATA, "%s: trained on backbone %.12s, not this run's %.12s", path, ms ? ms : "(none)",
			    backbone_sha);
	else if (mc && strcmp(mc, cell_id))
		rc = SB_ERR(err, SB_EDATA, "%s: metadata names cell '%s', not this run's '%s'", path, mc, cell_id);
	else if (mh && strcmp(mh, cell_sha))
		rc = SB_ERR(err, SB_EDATA,
			    "%s: trained for a cell of SHA-256 %.16s..., but %s now hashes to %.16s... (a cell.json "
			    "edited after training: budget, windows or another field)",
			    path, mh, cell_path, cell_sha);
	else if (!t || t->dtype != SB_F32 || t->ndim != 1 || (size_t)t->shape[0] != n)
		rc = SB_ERR(err, SB_EDATA, "%s: tensor 'selector' F32 [%zu] expected", path, n);
	else
		sb_sas_lm_params_set(x, t->data);
	sb_tensors_free(&ts);
	return rc;
}

/* per-position comparison of logits a (dense) and b */
static void compare(const float *a, const float *b, const int32_t *tok, int T, int V, int tail, double out[6])
{
	double s[6] = {0, 0, 0, 0, 0, 0};
	int nt = 0;
	for (int t = 0; t < T; t++) {
		const float *ar = a + (size_t)t * V, *br = b + (size_t)t * V;
		double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0;
		int ia = 0, ib = 0;
		for (int i = 0; i < V; i++) {
			if (ar[i] > ma) {
				ma = ar[i];
				ia = i;
			}
			if (br[i] > mb) {
				mb = br[i];
				ib = i;
			}
		}
		for (int i = 0; i < V; i++) {
			za += exp(ar[i] - ma);
			zb += exp(br[i] - mb);
		}
		double la = log(za), lb = log(zb), kl = 0;
		for (int i = 0; i < V; i++) {
			double lpa = ar[i] - ma - la, lpb = br[i] - mb - lb;
			kl += exp(lpa) * (lpa - lpb);
		}
		double nll = -(br[tok[t + 1]] - mb - lb), agree = ia == ib;
		s[0] += kl;
		s[1] += agree;
		s[2] += nll;
		if (t >= tail) {
			s[3] += kl;
			s[4] += agree;
			s[5] += nll;
			nt++;
		}
	}
	for (int i = 0; i < 3; i++)
		out[i] = s[i] / T;
	for (int i = 3; i < 6; i++)
		out[i] = nt ? s[i] / nt : NAN;
}

static int logits_of(struct method *me, struct sb_sas_lm *host, const int32_t *tok, float *out, int count,
                     struct sb_err *err)
{
	struct sb_sas_lm *x = me->x ? me->x : host;
	return sb_sas_lm_logits_ids(x, tok, me->mode, me->mode == SB_SAS_LM_MASK ? &me->mask : NULL, out,
	                            count ? &me->budget : NULL, err);
}

static void mean_ci(const double *d, int n, uint64_t seed, double *mean, double *lo, double *hi)
{
	struct sb_boot bc = {.seed = seed, .stream = 0, .resamples = 2000, .level = 0.95};
	*mean = sb_stats_mean(d, n);
	*lo = *hi = NAN;
	if (n >= 2)
		sb_stats_bootstrap_ci(d, n, &bc, lo, hi, NULL);
}

int sb_sas_scaled_eval(const char *run_dir, struct sb_jw *out, sb_sas_scaled_progress fn, void *arg, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	char *buf;
	size_t blen;
	SB_TRY(sb_read_file(path, &buf, &blen, 1 << 20, err));
	struct sb_json *cj = NULL;
	int rc = sb_json_parse(buf, blen, &cj, err);
	free(buf);
	struct sb_sas_scaled c;
	if (!rc)
		rc = sb_sas_scaled_parse(&c, cj, err);
	sb_json_free(cj);
	if (rc) {
		sb_err_prefix(err, "%s", path);
		return rc;
	}
	char cell_path[4600], cell_sha[SB_SHA256_HEX]; /* for load_selector */
	snprintf(cell_path, sizeof cell_path, "%s", path);
	SB_TRY(cell_hash(&c, cell_sha, err));
	struct backbone bb;
	SB_TRY(open_backbone(c.backbone, &bb, err));
	const struct sb_lm_cell *lc = &bb.cell;
	int T = lc->T, V = bb.m->cfg.vocab;
	struct method ms[MAXM];
	memset(ms, 0, sizeof ms);
	int nm = 0;
	struct sb_lm_mask bud; /* checked when the cell was read */
	if (!rc)
		rc = sb_lm_mask_parse(c.budget, &bud, err);
	snprintf(ms[nm].name, sizeof ms[nm].name, "dense");
	ms[nm++].mode = SB_SAS_LM_DENSE;
	{
		char *dup = strdup(c.masks), *save = NULL;
		for (char *t = strtok_r(dup, ";", &save); t && !rc && nm <= SB_SAS_SCALED_MAXMASK;
		     t = strtok_r(NULL, ";", &save)) {
			rc = mask_at_budget(t, &bud, &ms[nm].mask, err);
			if (!rc && (ms[nm].mask.kind == SB_LM_MASK_H2O || ms[nm].mask.kind == SB_LM_MASK_DENSE))
				continue;
			ms[nm].mode = SB_SAS_LM_MASK;
			sb_lm_mask_name(&ms[nm].mask, ms[nm].name, sizeof ms[nm].name);
			nm++;
		}
		free(dup);
	}
	/* a host for dense and masks, and one per trained selector */
	struct sb_sas_lm_cfg sc;
	struct sb_sas_lm *host = NULL;
	lm_cfg_for(&sc, &c, c.blocks[0], 1);
	if (!rc)
		rc = sb_sas_lm_new(bb.m, &sc, T, c.seed, &host, err);
	/* the trained selectors (pass 0); then (pass 1, with c.nogate) the trained selection without
	 * the log-gate reweighting (selected blocks keep their scores, as the training-free masks
	 * do): is it the choice of blocks or the gates? */
	for (int pass = 0; pass < (c.nogate ? 2 : 1); pass++)
		for (int bi = 0; bi < c.n_blocks && !rc; bi++) {
			struct method *me = &ms[nm++];
			snprintf(me->name, sizeof me->name, "sas-b%d%s", c.blocks[bi], pass ? "-nogate" : "");
			me->mode = SB_SAS_LM_SAS;
			me->block = c.blocks[bi];
			lm_cfg_for(&sc, &c, c.blocks[bi], 1);
			rc = sb_sas_lm_new(bb.m, &sc, T, c.seed, &me->x, err);
			char sp[4600];
			snprintf(sp, sizeof sp, "%s/selector-b%d.safetensors", run_dir, c.blocks[bi]);
			if (!rc)
				rc = load_selector(me->x, sp, c.blocks[bi], bb.sha, c.cell_id, cell_sha, cell_path, err);
			if (!rc && pass)
				sb_sas_lm_set_gate(me->x, 0);
		}
	/* the same selectors before training (the initialisation sb-train started from): does
	 * training the selector matter? */
	for (int bi = 0; bi < c.n_blocks && !rc && c.untrained; bi++) {
		struct method *me = &ms[nm++];
		snprintf(me->name, sizeof me->name, "sas-b%d-untrained", c.blocks[bi]);
		me->mode = SB_SAS_LM_SAS;
		me->block = c.blocks[bi];
		lm_cfg_for(&sc, &c, c.blocks[bi], 1);
		rc = sb_sas_lm_new(bb.m, &sc, T, c.seed, &me->x, err);
	}
	/* held-out text */
	struct sb_lm_corpus val = {0}, hay = {0};
	int hay_i = 0;
	for (int i = 0; i < lc->n_corpora; i++)
		if (lc->haystack[0] && !strncmp(lc->corpora[i], lc->haystack, strlen(lc->haystack)) &&
		    lc->corpora[i][strlen(lc->haystack)] == '=')
			hay_i = i;
	if (!rc)
		rc = sb_lm_corpus_read(lc->corpora[0], "valid", &val, err);
	if (!rc)
		rc = sb_lm_corpus_read(lc->corpora[hay_i], "valid", &hay, err);
	if (!rc && !bb.tok)
		rc = corpus_fits(&val, V, err);
	if (!rc && !bb.tok)
		rc = corpus_fits(&hay, V, err);
	/* the fidelity text in the backbone's ids; windows of T+1 of them */
	int32_t *vids = NULL;
	size_t nv = 0;
	double bpt = 1;
	if (!rc)
		rc = text_ids(&bb, val.bytes, val.n, &vids, &nv, err);
	if (!rc)
		rc = bytes_per_token(&bb, &hay, &bpt, err);
	if (!rc && nv < (size_t)T + 1)
		rc = SB_ERR(err, SB_EDATA, "%s: the valid part (%zu %s) is shorter than a window", val.path, nv,
		            bb.tok ? "tokens" : "bytes");
	int W = c.windows, P = c.probes * c.n_tasks;
	for (int i = 0; i < nm && !rc; i++) {
		struct method *me = &ms[i];
		double **arr[6] = {&me->kl, &me->top1, &me->nll, &me->kl_t, &me->top1_t, &me->nll_t};
		for (int k = 0; k < 6; k++)
			if (!(*arr[k] = calloc((size_t)W, sizeof(double))))
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		if (!(me->correct = calloc((size_t)(P ? P : 1), 1)))
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	float *ld = malloc((size_t)T * V * sizeof(float)), *lm = malloc((size_t)T * V * sizeof(float));
	int32_t *tok = calloc((size_t)T + 1, sizeof *tok);
	if (!rc && (!ld || !lm || !tok))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_lm_mask rec;
	sb_lm_mask_parse(c.budget, &rec, NULL);
	int tail = rec.sinks + rec.window + rec.topk;
	if (tail >= T)
		tail = T / 2;
	/* records */
	struct sb_atomic a;
	snprintf(path, sizeof path, "%s/eval.ndjson", run_dir);
	if (!rc)
		rc = sb_atomic_open(&a, path, err);
	if (rc)
		goto done;
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	char mp[4200];
	snprintf(mp, sizeof mp, "%s/model.safetensors", c.backbone);
	struct sb_input in = {.path = mp, .size_bytes = sb_file_size(mp)};
	memcpy(in.sha256, bb.sha, sizeof bb.sha);
	struct sb_run_meta meta = {.device = bb.be->device, .threads = 1, .inputs = &in, .n_inputs = 1};
	rc = sb_record_run_meta(&w, &meta, err);
/* end a record; summary records (EMIT) go to out (stdout) too */
#define EMIT()                                                                                                         \
	do {                                                                                                           \
		sb_jw_obj_end(&w);                                                                                     \
		if (out && out->out && !w.oom) {                                                                       \
			fwrite(w.buf, 1, w.len, out->out);                                                             \
			fputc('\n', out->out);                                                                         \
		}                                                                                                      \
		if (!rc)                                                                                               \
			rc = sb_jw_line(&w, err);                                                                      \
	} while (0)
	if (!rc) {
		sb_jw_record(&w, "sas.scaled.setup", 1);
		sb_jw_kstr(&w, "cell_id", c.cell_id);
		sb_jw_kstr(&w, "backbone", c.backbone);
		sb_jw_kstr(&w, "backbone_sha256", bb.sha);
		sb_jw_key(&w, "model");
		sb_lm_cfg_json(&w, &bb.m->cfg);
		sb_jw_kint(&w, "T", T);
		sb_jw_kint(&w, "tail_from", tail);
		sb_jw_kint(&w, "n_windows", W);
		sb_jw_kint(&w, "probes_per_task", c.probes);
		sb_jw_kstr(&w, "fidelity_corpus", val.name);
		sb_jw_kstr(&w, "haystack", hay.name);
		sb_jw_kstr(&w, "budget", c.budget);
		sb_jw_kstr(&w, "ids", bb.tok ? "tokenizer" : "bytes");
		if (bb.tok) {
			sb_jw_kint(&w, "fidelity_tokens", (int64_t)nv);
			sb_jw_kf64(&w, "haystack_bytes_per_token", bpt);
		}
		sb_jw_key(&w, "methods");
		sb_jw_arr(&w);
		for (int i = 0; i < nm; i++)
			sb_jw_str(&w, ms[i].name);
		sb_jw_arr_end(&w);
		EMIT();
	}
	/* fidelity */
	for (int wi = 0; wi < W && !rc; wi++) {
		/* T+1 ids, the first the tokenizer's BOS when it puts one: the LM evaluation's windows */
		int32_t bos = bb.tok ? sb_tok_bos(bb.tok) : -1;
		size_t len = (size_t)T + (bos < 0), span = nv - ((size_t)T + 1);
		size_t st = W > 1 ? (size_t)((double)span * wi / (W - 1)) : 0;
		if (bos >= 0)
			tok[0] = bos;
		memcpy(tok + (bos >= 0), vids + st, len * sizeof *tok);
		rc = logits_of(&ms[0], host, tok, ld, 1, err);
		for (int i = 0; i < nm && !rc; i++) {
			struct method *me = &ms[i];
			rc = i ? logits_of(me, host, tok, lm, 1, err) : 0;
			if (rc)
				break;
			double r[6];
			compare(ld, i ? lm : ld, tok, T, V, tail, r);
			me->kl[wi] = r[0];
			me->top1[wi] = r[1];
			me->nll[wi] = r[2];
			me->kl_t[wi] = r[3];
			me->top1_t[wi] = r[4];
			me->nll_t[wi] = r[5];
			sb_jw_record(&w, "sas.scaled.fidelity.window", 1);
			sb_jw_kstr(&w, "method", me->name);
			sb_jw_kint(&w, "window", wi);
			sb_jw_kint(&w, "start", (int64_t)st);
			sb_jw_kf64(&w, "kl", r[0]);
			sb_jw_kf64(&w, "top1", r[1]);
			sb_jw_kf64(&w, "nll", r[2]);
			sb_jw_kf64(&w, "kl_tail", r[3]);
			sb_jw_kf64(&w, "top1_tail", r[4]);
			sb_jw_kf64(&w, "nll_tail", r[5]);
			sb_jw_obj_end(&w);
			rc = sb_jw_line(&w, err);
		}
		if (fn)
			fn(arg, "fidelity windows", wi + 1, W, 0);
	}
	double dense_nll = ms[0].nll ? sb_stats_mean(ms[0].nll, W) : NAN;
	for (int i = 0; i < nm && !rc; i++) {
		struct method *me = &ms[i];
		double m, lo, hi;
		sb_jw_record(&w, "sas.scaled.fidelity", 1);
		sb_jw_kstr(&w, "method", me->name);
		sb_jw_kf64(&w, "budget_fraction", me->budget.causal > 0 ? me->budget.kept / me->budget.causal : 1.0);
		mean_ci(me->kl, W, c.seed, &m, &lo, &hi);
		sb_jw_kf64(&w, "kl", m);
		sb_jw_kf64(&w, "kl_lo", lo);
		sb_jw_kf64(&w, "kl_hi", hi);
		sb_jw_kf64(&w, "top1", sb_stats_mean(me->top1, W));
		double nll = sb_stats_mean(me->nll, W);
		sb_jw_kf64(&w, "nll", nll);
		sb_jw_kf64(&w, "ppl", exp(fmin(nll, 20)));
		sb_jw_kf64(&w, "ppl_change_pct",
		           100.0 * (exp(fmin(nll, 20)) - exp(fmin(dense_nll, 20))) / exp(fmin(dense_nll, 20)));
		mean_ci(me->kl_t, W, c.seed, &m, &lo, &hi);
		sb_jw_kf64(&w, "kl_tail", m);
		sb_jw_kf64(&w, "kl_tail_lo", lo);
		sb_jw_kf64(&w, "kl_tail_hi", hi);
		sb_jw_kf64(&w, "top1_tail", sb_stats_mean(me->top1_t, W));
		sb_jw_kf64(&w, "nll_tail", sb_stats_mean(me->nll_t, W));
		EMIT();
	}
	/* paired: each SAS variant against every other method, on kl_tail */
	double *d = malloc((size_t)W * sizeof *d);
	for (int i = 0; i < nm && !rc && d; i++) {
		if (ms[i].mode != SB_SAS_LM_SAS || strstr(ms[i].name, "untrained") || strstr(ms[i].name, "nogate"))
			continue;
		for (int j = 1; j < nm && !rc; j++) {
			if (j == i)
				continue;
			for (int k = 0; k < W; k++)
				d[k] = ms[i].kl_t[k] - ms[j].kl_t[k];
			struct sb_ttest tt;
			struct sb_wilcoxon wx;
			double m, lo, hi;
			mean_ci(d, W, c.seed, &m, &lo, &hi);
			int okt = !sb_stats_ttest_paired(d, W, &tt, NULL);
			int okw = !sb_stats_wilcoxon(d, W, SB_WILCOXON_AUTO, &wx, NULL);
			sb_jw_record(&w, "sas.scaled.fidelity.pair", 1);
			sb_jw_kstr(&w, "method_a", ms[i].name);
			sb_jw_kstr(&w, "method_b", ms[j].name);
			sb_jw_kstr(&w, "metric", "kl_tail");
			sb_jw_kint(&w, "n_windows", W);
			sb_jw_kf64(&w, "mean_diff", m);
			sb_jw_kf64(&w, "ci_lo", lo);
			sb_jw_kf64(&w, "ci_hi", hi);
			sb_jw_kf64(&w, "p_t", okt ? tt.p : NAN);
			sb_jw_kf64(&w, "p_wilcoxon", okw ? wx.p : NAN);
			sb_jw_kf64(&w, "cohen_dz", sb_stats_cohen_dz(d, W));
			EMIT();
		}
	}
	free(d);
	/* retrieval: greedy decoding with full-sequence forwards, turn by turn (the probe is right
	 * when every turn's answer is: niah_multiquery has four); each turn's input follows the
	 * model's own previous answer, as in the LM track's evaluation */
	for (int ti = 0; ti < c.n_tasks && !rc; ti++)
		for (int pi = 0; pi < c.probes && !rc; pi++) {
			struct sb_lm_probe pr;
			struct turn_in tin;
			double depth = (pi + 0.5) / c.probes;
			if (bb.tok)
				rc = token_probe(&bb, c.tasks[ti], T, &hay, c.seed, pi, depth, bpt, &pr, &tin, err);
			else {
				rc = sb_lm_probe_make(c.tasks[ti], T, hay.bytes, hay.n, c.seed, SB_RNG_SYNTH, (uint64_t)pi,
				                      depth, &pr, err);
				if (!rc && (rc = turn_inputs(&bb, &pr, &tin, err)))
					sb_lm_probe_free(&pr);
			}
			if (rc)
				break;
			int alen = pr.answer_end[0] - pr.answer_beg[0];
			for (int i = 0; i < nm && !rc; i++) {
				struct method *me = &ms[i];
				int n = 0, ok = 1;
				memset(tok, 0, ((size_t)T + 1) * sizeof *tok);
				uint8_t gen[256], gen0[256];
				int ng0 = 0;
				for (int k = 0; k < pr.n_turns && !rc; k++) {
					int ak = pr.answer_end[k] - pr.answer_beg[k];
					int fits = n + tin.n[k] <= T; /* a turn that does not fit generates nothing */
					for (int t = 0; fits && t < tin.n[k]; t++)
						tok[n++] = tin.ids[k][t];
					/* greedy decoding until a newline or the answer's length in bytes */
					int ng = 0, stop = 0;
					while (fits && !stop && ng < ak && ng < (int)sizeof gen && n < T && !rc) {
						rc = logits_of(me, host, tok, lm, 0, err);
						const float *row = lm + (size_t)(n - 1) * V;
						int best = 0;
						for (int v = 1; v < V; v++)
							if (row[v] > row[best])
								best = v;
						char tb[64];
						int L = bb.tok ? sb_tok_token_bytes(bb.tok, best, tb, sizeof tb) : 1;
						if (!bb.tok)
							tb[0] = (char)best;
						for (int q = 0; q < L && q < (int)sizeof tb && !stop; q++) {
							if (tb[q] == '\n')
								stop = 1;
							else if (ng < (int)sizeof gen)
								gen[ng++] = (uint8_t)tb[q];
						}
						if (!stop)
							tok[n++] = best;
					}
					if (k == 0) { /* the record shows turn 0's answer and output */
						memcpy(gen0, gen, (size_t)ng);
						ng0 = ng;
					}
					ok = ok && fits && sb_lm_probe_match(&pr, k, gen, ng);
				}
				ok = ok && !rc;
				me->correct[ti * c.probes + pi] = (uint8_t)ok;
				sb_jw_record(&w, "probe.result", 1);
				sb_jw_kstr(&w, "model", c.cell_id);
				sb_jw_kstr(&w, "task", sb_lm_task_name(c.tasks[ti]));
				sb_jw_kstr(&w, "method", me->name);
				sb_jw_kint(&w, "probe_id", pi);
				sb_jw_kbool(&w, "correct", ok);
				sb_jw_kf64(&w, "depth", pr.depth);
				sb_jw_key(&w, "expected");
				sb_jw_strn(&w, (const char *)pr.text + pr.answer_beg[0],
				           (size_t)(alen > 0 ? alen - 1 : 0));
				sb_jw_key(&w, "output"); /* valid UTF-8 whatever was generated (U+FFFD for the rest) */
				char shown[3 * sizeof gen0 + 4];
				sb_jw_strn(&w, shown, sb_lm_display_bytes(shown, sizeof shown, gen0, (size_t)ng0));
				sb_jw_obj_end(&w);
				if (!rc)
					rc = sb_jw_line(&w, err);
			}
			sb_lm_probe_free(&pr);
			turn_in_free(&tin);
			if (fn)
				fn(arg, "probes", ti * c.probes + pi + 1, P, 0);
		}
	for (int i = 0; i < nm && !rc && P; i++) {
		for (int s = -1; s < c.n_tasks && !rc; s++) {
			int k = 0, n = 0;
			for (int ti = 0; ti < c.n_tasks; ti++)
				if (s < 0 || s == ti)
					for (int pi = 0; pi < c.probes; pi++) {
						k += ms[i].correct[ti * c.probes + pi];
						n++;
					}
			double lo, hi;
			sb_stats_wilson(k, n, 0.95, &lo, &hi, NULL);
			sb_jw_record(&w, "sas.scaled.retrieval", 1);
			sb_jw_kstr(&w, "method", ms[i].name);
			sb_jw_kstr(&w, "subset", s < 0 ? "all" : sb_lm_task_name(c.tasks[s]));
			sb_jw_kint(&w, "correct", k);
			sb_jw_kint(&w, "n", n);
			sb_jw_kf64(&w, "accuracy", (double)k / n);
			sb_jw_kf64(&w, "wilson_lo", lo);
			sb_jw_kf64(&w, "wilson_hi", hi);
			EMIT();
		}
	}
	for (int i = 0; i < nm && !rc && P; i++) {
		if (ms[i].mode != SB_SAS_LM_SAS || strstr(ms[i].name, "untrained") || strstr(ms[i].name, "nogate"))
			continue;
		for (int j = 0; j < nm && !rc; j++) {
			if (j == i)
				continue;
			int64_t n11 = 0, n10 = 0, n01 = 0, n00 = 0;
			for (int p = 0; p < P; p++) {
				int x = ms[i].correct[p], y = ms[j].correct[p];
				n11 += x && y;
				n10 += x && !y;
				n01 += !x && y;
				n00 += !x && !y;
			}
			struct sb_paired_binary pb;
			int okp = !sb_stats_paired_binary(n11, n10, n01, n00, 0.95, &pb, NULL);
			sb_jw_record(&w, "sas.scaled.retrieval.pair", 1);
			sb_jw_kstr(&w, "method_a", ms[i].name);
			sb_jw_kstr(&w, "method_b", ms[j].name);
			sb_jw_kint(&w, "n", P);
			sb_jw_kint(&w, "n11", n11);
			sb_jw_kint(&w, "n10", n10);
			sb_jw_kint(&w, "n01", n01);
			sb_jw_kint(&w, "n00", n00);
			sb_jw_kf64(&w, "diff", okp ? pb.diff : NAN);
			sb_jw_kf64(&w, "ci_lo", okp ? pb.lo : NAN);
			sb_jw_kf64(&w, "ci_hi", okp ? pb.hi : NAN);
			sb_jw_kf64(&w, "mcnemar_p", sb_stats_mcnemar_exact(n10, n01));
			EMIT();
		}
	}
#undef EMIT
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
done:
	free(ld);
	free(lm);
	free(tok);
	free(vids);
	for (int i = 0; i < nm; i++) {
		sb_sas_lm_free(ms[i].x);
		free(ms[i].kl);
		free(ms[i].top1);
		free(ms[i].nll);
		free(ms[i].kl_t);
		free(ms[i].top1_t);
		free(ms[i].nll_t);
		free(ms[i].correct);
	}
	sb_sas_lm_free(host);
	sb_lm_corpus_free(&val);
	sb_lm_corpus_free(&hay);
	close_backbone(&bb);
	return rc;
}
