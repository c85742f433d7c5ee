/* svg.c — a small SVG writer and sb-stats' two figures:
 *   budget.svg  paired difference vs epoch budget, bootstrap CI band per method, a panel per task
 *   curves.svg  mean validation accuracy by epoch per method, a panel per task
 * Written to memory, then atomically to the target path. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "model.h"

/* ---- the writer ---- */

struct svg {
	FILE *f;
	char *buf;
	size_t len;
};

static int svg_begin(struct svg *s, double w, double h, struct sb_err *err)
{
	s->buf = NULL;
	s->len = 0;
	s->f = open_memstream(&s->buf, &s->len);
	if (!s->f)
		return SB_ERRNO(err, "open_memstream");
	fprintf(s->f,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
	        "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
	        "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
	        w, h, w, h, w, h);
	return 0;
}

static int svg_end(struct svg *s, const char *path, struct sb_err *err)
{
	fputs("</svg>\n", s->f);
	if (fclose(s->f)) {
		free(s->buf);
		return SB_ERRNO(err, "svg buffer");
	}
	int rc = sb_write_file_atomic(path, s->buf, s->len, err);
	free(s->buf);
	return rc;
}

static void xml_text(FILE *f, const char *t)
{
	for (; *t; t++) {
		switch (*t) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*t, f);
		}
	}
}

/* anchor: "start" | "middle" | "end"; rotate in degrees about (x, y) */
static void svg_text(struct svg *s, double x, double y, double size, const char *anchor, const char *weight,
                     double rotate, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void svg_text(struct svg *s, double x, double y, double size, const char *anchor, const char *weight,
                     double rotate, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(s->f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\" fill=\"#222\"", x, y, size,
	        anchor);
	if (weight)
		fprintf(s->f, " font-weight=\"%s\"", weight);
	if (rotate != 0)
		fprintf(s->f, " transform=\"rotate(%.1f %.2f %.2f)\"", rotate, x, y);
	fputc('>', s->f);
	xml_text(s->f, buf);
	fputs("</text>\n", s->f);
}

static void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const char *color, double width,
                     const char *dash)
{
	fprintf(s->f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\"", x1,
	        y1, x2, y2, color, width);
	if (dash)
		fprintf(s->f, " stroke-dasharray=\"%s\"", dash);
	fputs("/>\n", s->f);
}

static void svg_rect(struct svg *s, double x, double y, double w, double h, const char *fill, const char *stroke)
{
	fprintf(s->f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"%s\"/>\n", x, y,
	        w, h, fill, stroke ? stroke : "none");
}

/* A polyline through (x[i], y[i]), skipping non-finite points (the line breaks there). */
static void svg_polyline(struct svg *s, const double *x, const double *y, int n, const char *color, double width)
{
	int open = 0;
	for (int i = 0; i < n; i++) {
		if (!isfinite(x[i]) || !isfinite(y[i])) {
			if (open)
				fprintf(s->f,
				        "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.2f\" "
				        "stroke-linejoin=\"round\"/>\n",
				        color, width);
			open = 0;
			continue;
		}
		if (!open) {
			fputs("<polyline points=\"", s->f);
			open = 1;
		}
		fprintf(s->f, "%.2f,%.2f ", x[i], y[i]);
	}
	if (open)
		fprintf(s->f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.2f\" stroke-linejoin=\"round\"/>\n",
		        color, width);
}

static void svg_circle(struct svg *s, double x, double y, double r, const char *color)
{
	fprintf(s->f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\"/>\n", x, y, r, color);
}

/* A band between lo and hi over x (closed polygon), fill with opacity. */
static void svg_band(struct svg *s, const double *x, const double *lo, const double *hi, int n, const char *color,
                     double opacity)
{
	if (n < 1)
		return;
	fputs("<polygon points=\"", s->f);
	for (int i = 0; i < n; i++)
		fprintf(s->f, "%.2f,%.2f ", x[i], hi[i]);
	for (int i = n - 1; i >= 0; i--)
		fprintf(s->f, "%.2f,%.2f ", x[i], lo[i]);
	fprintf(s->f, "\" fill=\"%s\" fill-opacity=\"%.2f\" stroke=\"none\"/>\n", color, opacity);
}

/* ---- axes ---- */

/* A "nice" step (1, 2, 2.5 or 5 times a power of ten) giving about `target` intervals. */
static double nice_step(double range, int target)
{
	if (!(range > 0))
		return 1;
	double raw = range / target, p = pow(10, floor(log10(raw))), f = raw / p;
	double m = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
	return m * p;
}

static int step_decimals(double step)
{
	int dec = 0;
	while (dec < 8 && fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-9 * step * pow(10, dec))
		dec++;
	return dec;
}

struct axes {
	double x0, y0, w, h; /* plot area in pixels (y0 = top) */
	double xmin, xmax, ymin, ymax;
	double xstep, ystep;
};

static double ax_x(const struct axes *a, double v)
{
	return a->x0 + (v - a->xmin) / (a->xmax - a->xmin) * a->w;
}
static double ax_y(const struct axes *a, double v)
{
	return a->y0 + a->h - (v - a->ymin) / (a->ymax - a->ymin) * a->h;
}

/* Pad [lo, hi] to whole ticks; a degenerate range gets some room. */
static void axis_range(double *lo, double *hi, double *step, int target)
{
	if (!isfinite(*lo) || !isfinite(*hi)) {
		*lo = 0;
		*hi = 1;
	}
	if (*hi - *lo < 1e-12) {
		double c = *lo, r = fabs(c) > 0 ? fabs(c) * 0.1 : 1;
		*lo = c - r;
		*hi = c + r;
	}
	*step = nice_step(*hi - *lo, target);
	*lo = floor(*lo / *step + 1e-9) * *step;
	*hi = ceil(*hi / *step - 1e-9) * *step;
}

static void draw_axes(struct svg *s, const struct axes *a, const char *xlabel, const char *ylabel, const char *title)
{
	svg_rect(s, a->x0, a->y0, a->w, a->h, "#fbfbfb", "#888");
	int xd = step_decimals(a->xstep), yd = step_decimals(a->ystep);
	for (double v = a->ymin; v <= a->ymax + a->ystep * 1e-6; v += a->ystep) {
		double y = ax_y(a, v);
		svg_line(s, a->x0, y, a->x0 + a->w, y, "#e3e3e3", 1, NULL);
		svg_line(s, a->x0 - 5, y, a->x0, y, "#444", 1, NULL);
		double vv = fabs(v) < a->ystep * 1e-9 ? 0 : v;
		svg_text(s, a->x0 - 8, y + 4.5, 12, "end", NULL, 0, "%.*f", yd, vv);
	}
	/* x ticks: the first value, then the multiples of the step (epochs: 1, 5, 10, ...) */
	for (double v = a->xmin; v <= a->xmax + a->xstep * 1e-6;) {
		double x = ax_x(a, v);
		svg_line(s, x, a->y0 + a->h, x, a->y0 + a->h + 5, "#444", 1, NULL);
		svg_text(s, x, a->y0 + a->h + 19, 12, "middle", NULL, 0, "%.*f", xd, v);
		double next = ceil(v / a->xstep + 1e-9) * a->xstep;
		v = next > v + 1e-9 ? next : v + a->xstep;
	}
	svg_text(s, a->x0 + a->w / 2, a->y0 + a->h + 38, 13, "middle", NULL, 0, "%s", xlabel);
	svg_text(s, a->x0 - 52, a->y0 + a->h / 2, 13, "middle", NULL, -90, "%s", ylabel);
	svg_text(s, a->x0 + a->w / 2, a->y0 - 10, 14, "middle", "bold", 0, "%s", title);
}

/* x axis over epochs 1..K: integer steps of a nice size */
static void epoch_axis(struct axes *ax, int K)
{
	ax->xmin = 1;
	ax->xmax = K > 1 ? K : 2;
	ax->xstep = nice_step(ax->xmax - ax->xmin, 6);
	if (ax->xstep < 1)
		ax->xstep = 1;
	ax->xstep = round(ax->xstep);
}

/* ---- colours and layout ---- */

/* Okabe-Ito (colour-blind safe), then a few more. */
static const char *PALETTE[] = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00",
                                "#0072B2", "#CC79A7", "#999933", "#882255", "#44AA99"};
#define N_PALETTE (int)(sizeof PALETTE / sizeof PALETTE[0])

static const char *method_color(const struct data *d, int m)
{
	int o = method_order(d->methods.s[m]);
	if (o < 7)
		return PALETTE[o];
	return PALETTE[7 + m % (N_PALETTE - 7)];
}

#define PANEL_W 380.0
#define PANEL_H 270.0
#define MARGIN_L 78.0
#define MARGIN_R 22.0
#define MARGIN_T 40.0
#define MARGIN_B 56.0
#define LEGEND_H 34.0
#define FOOTER_H 24.0

/* Legend for the methods in ms[0..n) across the top. */
static void legend(struct svg *s, const struct data *d, const int *ms, int n, double width, const char *dash0)
{
	double x = 20, y = 22;
	for (int i = 0; i < n; i++) {
		const char *name = method_display(d->methods.s[ms[i]]);
		double w = 48 + 8.0 * (double)strlen(name);
		if (x + w > width - 10) {
			x = 20;
			y += 20;
		}
		svg_line(s, x, y - 4, x + 24, y - 4, method_color(d, ms[i]), 2.5, i == 0 ? dash0 : NULL);
		svg_text(s, x + 30, y, 13, "start", NULL, 0, "%s", name);
		x += w;
	}
}

static int cmp_group_order(const struct data *d, int ga, int gb)
{
	int ta = task_order(d->tasks.s[d->groups[ga].task]), tb = task_order(d->tasks.s[d->groups[gb].task]);
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return (ga > gb) - (ga < gb);
}

static void sort_groups(const struct data *d, int *g, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cmp_group_order(d, g[j - 1], g[j]) > 0; j--) {
			int t = g[j];
			g[j] = g[j - 1];
			g[j - 1] = t;
		}
}

/* A figure's panels (the groups it shows, in task order, three to a row) and its legend (the
 * methods it shows, in Table 2 order). */
struct panels {
	int *groups, ng, *ms, nm, ncols, nrows;
};

static int panels_init(struct panels *p, const struct data *d, struct sb_err *err)
{
	*p = (struct panels){0};
	p->groups = calloc((size_t)d->n_groups + 1, sizeof *p->groups);
	p->ms = calloc((size_t)d->methods.n + 1, sizeof *p->ms);
	if (!p->groups || !p->ms) {
		free(p->groups);
		free(p->ms);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	return 0;
}

static void add_distinct(int *set, int *n, int v)
{
	for (int i = 0; i < *n; i++)
		if (set[i] == v)
			return;
	set[(*n)++] = v;
}

/* a curve of method m in the panel of group g */
static void panels_add(struct panels *p, int g, int m)
{
	add_distinct(p->groups, &p->ng, g);
	add_distinct(p->ms, &p->nm, m);
}

/* after every panels_add: the order and the layout */
static void panels_done(struct panels *p, const struct data *d)
{
	sort_groups(d, p->groups, p->ng);
	for (int i = 1; i < p->nm; i++)
		for (int j = i;
		     j > 0 && method_order(d->methods.s[p->ms[j - 1]]) > method_order(d->methods.s[p->ms[j]]); j--) {
			int t = p->ms[j];
			p->ms[j] = p->ms[j - 1];
			p->ms[j - 1] = t;
		}
	p->ncols = p->ng < 3 ? (p->ng ? p->ng : 1) : 3;
	p->nrows = p->ng ? (p->ng + p->ncols - 1) / p->ncols : 1;
}

static void panels_free(struct panels *p)
{
	free(p->groups);
	free(p->ms);
}

/* the plot area of panel k */
static void panel_axes(const struct panels *p, int k, struct axes *ax)
{
	ax->x0 = (k % p->ncols) * PANEL_W + MARGIN_L;
	ax->y0 = LEGEND_H + (k / p->ncols) * PANEL_H + MARGIN_T;
	ax->w = PANEL_W - MARGIN_L - MARGIN_R;
	ax->h = PANEL_H - MARGIN_T - MARGIN_B;
}

/* a figure given up on an error: nothing is written */
static void svg_discard(struct svg *s)
{
	fclose(s->f);
	free(s->buf);
}

/* ---- figure 1: difference vs budget ---- */

int plot_budget(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                struct sb_err *err)
{
	struct panels p;
	int rc = panels_init(&p, d, err);
	if (rc)
		return rc;
	for (int c = 0; c < a->n_val; c++)
		panels_add(&p, a->val[c].group, a->val[c].method);
	panels_done(&p, d);
	double W = p.ncols * PANEL_W, H = LEGEND_H + p.nrows * PANEL_H + FOOTER_H + 16; /* two caption lines */
	struct svg s;
	if ((rc = svg_begin(&s, W, H, err))) {
		panels_free(&p);
		return rc;
	}
	legend(&s, d, p.ms, p.nm, W, NULL);
	/* the caption in two lines: one would overflow a figure of one or two panels */
	svg_text(&s, 20, H - 24, 12, "start", NULL, 0,
	         "Lines: mean paired difference (method - %s) of the best validation accuracy", o->baseline);
	svg_text(&s, 20, H - 9, 12, "start", NULL, 0,
	         "within the first E epochs; bands: %.0f%% percentile bootstrap CI over seeds.", 100 * o->level);
	double *xs = NULL, *ys = NULL, *lo = NULL, *hi = NULL;
	for (int k = 0; k < p.ng; k++) {
		int g = p.groups[k];
		struct axes ax;
		panel_axes(&p, k, &ax);
		int Kmax = 1, nmax = 0;
		double ymin = 0, ymax = 0;
		for (int c = 0; c < a->n_val; c++) {
			const struct comparison *cm = &a->val[c];
			if (cm->group != g)
				continue;
			if (cm->K > Kmax)
				Kmax = cm->K;
			if (cm->n > nmax)
				nmax = cm->n;
			for (int e = 0; e < cm->K; e++) {
				ymin = fmin(ymin, 100 * cm->b_lo[e]);
				ymax = fmax(ymax, 100 * cm->b_hi[e]);
			}
		}
		epoch_axis(&ax, Kmax);
		ax.ymin = ymin;
		ax.ymax = ymax;
		axis_range(&ax.ymin, &ax.ymax, &ax.ystep, 5);
		char lab[256], title[300];
		group_label(d, g, lab, sizeof lab);
		snprintf(title, sizeof title, "%s (n = %d seeds)", task_display(lab), nmax);
		draw_axes(&s, &ax, "epoch budget E (epochs)", "\xCE\x94 val. accuracy (pp)", title);
		svg_line(&s, ax.x0, ax_y(&ax, 0), ax.x0 + ax.w, ax_y(&ax, 0), "#555", 1.2, "5,4");
		free(xs);
		free(ys);
		free(lo);
		free(hi);
		xs = calloc((size_t)Kmax, sizeof *xs);
		ys = calloc((size_t)Kmax, sizeof *ys);
		lo = calloc((size_t)Kmax, sizeof *lo);
		hi = calloc((size_t)Kmax, sizeof *hi);
		if (!xs || !ys || !lo || !hi) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		for (int pass = 0; pass < 2; pass++) /* bands first, lines on top */
			for (int i = 0; i < p.nm; i++)
				for (int c = 0; c < a->n_val; c++) {
					const struct comparison *cm = &a->val[c];
					if (cm->group != g || cm->method != p.ms[i])
						continue;
					for (int e = 0; e < cm->K; e++) {
						xs[e] = ax_x(&ax, e + 1);
						ys[e] = ax_y(&ax, 100 * cm->b_mean[e]);
						lo[e] = ax_y(&ax, 100 * cm->b_lo[e]);
						hi[e] = ax_y(&ax, 100 * cm->b_hi[e]);
					}
					if (pass == 0) {
						svg_band(&s, xs, lo, hi, cm->K, method_color(d, p.ms[i]), 0.15);
					} else {
						svg_polyline(&s, xs, ys, cm->K, method_color(d, p.ms[i]), 2.2);
						if (cm->K == 1)
							svg_circle(&s, xs[0], ys[0], 3, method_color(d, p.ms[i]));
					}
				}
	}
	free(xs);
	free(ys);
	free(lo);
	free(hi);
	panels_free(&p);
	if (rc) {
		svg_discard(&s);
		return rc;
	}
	return svg_end(&s, path, err);
}

/* ---- figure 2: validation curves ---- */

int plot_curves(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                struct sb_err *err)
{
	struct panels p;
	int rc = panels_init(&p, d, err);
	if (rc)
		return rc;
	for (int c = 0; c < a->n_curves; c++)
		panels_add(&p, a->curves[c].group, a->curves[c].method);
	panels_done(&p, d);
	double W = p.ncols * PANEL_W, H = LEGEND_H + p.nrows * PANEL_H + FOOTER_H;
	struct svg s;
	if ((rc = svg_begin(&s, W, H, err))) {
		panels_free(&p);
		return rc;
	}
	legend(&s, d, p.ms, p.nm, W, NULL);
	svg_text(&s, 20, H - 10, 12, "start", NULL, 0,
	         "Lines: mean validation accuracy over the seeds of each method.");
	for (int k = 0; k < p.ng && !rc; k++) {
		int g = p.groups[k];
		struct axes ax;
		panel_axes(&p, k, &ax);
		int Kmax = 1, nseeds = 0;
		double ymin = INFINITY, ymax = -INFINITY;
		for (int c = 0; c < a->n_curves; c++) {
			const struct curve *cu = &a->curves[c];
			if (cu->group != g)
				continue;
			if (cu->K > Kmax)
				Kmax = cu->K;
			if (cu->K && cu->n[0] > nseeds)
				nseeds = cu->n[0];
			for (int e = 0; e < cu->K; e++) {
				ymin = fmin(ymin, 100 * cu->mean[e]);
				ymax = fmax(ymax, 100 * cu->mean[e]);
			}
		}
		epoch_axis(&ax, Kmax);
		ax.ymin = ymin;
		ax.ymax = ymax;
		axis_range(&ax.ymin, &ax.ymax, &ax.ystep, 5);
		char lab[256], title[300];
		group_label(d, g, lab, sizeof lab);
		snprintf(title, sizeof title, "%s (mean of %d seed%s)", task_display(lab), nseeds,
		         nseeds == 1 ? "" : "s");
		draw_axes(&s, &ax, "epoch (epochs completed)", "val. accuracy (%)", title);
		double *xs = calloc((size_t)Kmax, sizeof *xs), *ys = calloc((size_t)Kmax, sizeof *ys);
		if (!xs || !ys) {
			free(xs);
			free(ys);
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		for (int i = 0; i < p.nm; i++)
			for (int c = 0; c < a->n_curves; c++) {
				const struct curve *cu = &a->curves[c];
				if (cu->group != g || cu->method != p.ms[i])
					continue;
				for (int e = 0; e < cu->K; e++) {
					xs[e] = ax_x(&ax, e + 1);
					ys[e] = ax_y(&ax, 100 * cu->mean[e]);
				}
				svg_polyline(&s, xs, ys, cu->K, method_color(d, p.ms[i]), 2.0);
				for (int e = 0; e < cu->K && cu->K <= 12; e++)
					svg_circle(&s, xs[e], ys[e], 2.2, method_color(d, p.ms[i]));
			}
		free(xs);
		free(ys);
	}
	(void)o;
	panels_free(&p);
	if (rc) {
		svg_discard(&s);
		return rc;
	}
	return svg_end(&s, path, err);
}

/* ---- figure 3: ours against the published values (a forest plot) ---- */

#define MINUS "\xE2\x88\x92" /* − */

/* the rows of one panel: means (levels) when levels, else differences */
static int pub_in_panel(const struct data *d, const struct pub_result *r, int levels)
{
	return isfinite(r->ours) && pub_is_mean(d->pubs[r->pub].quantity) == levels;
}

/* One panel: our interval and mean minus the published value, in percentage points, so that
 * every row shares the axis and the published value is the dashed line at 0. Returns the
 * height used. */
static double published_panel(struct svg *s, const struct data *d, const struct analysis *a, const struct opts *o,
                              int levels, double top, double label_w, double plot_w)
{
	const double ROW = 20;
	int n = 0;
	double m = 0;
	for (int i = 0; i < a->n_pub; i++) {
		const struct pub_result *r = &a->pub[i];
		if (!pub_in_panel(d, r, levels))
			continue;
		double v = d->pubs[r->pub].value;
		m = fmax(m, fmax(100 * (v - r->lo), 100 * (r->hi - v)));
		n++;
	}
	if (!n)
		return 0;
	struct axes ax = {.x0 = label_w, .y0 = top + 22, .w = plot_w, .h = n * ROW};
	ax.xmin = -1.05 * m; /* symmetric about the published value, with a margin */
	ax.xmax = 1.05 * m;
	axis_range(&ax.xmin, &ax.xmax, &ax.xstep, 6);
	svg_text(s, ax.x0 + ax.w / 2, top + 14, 13, "middle", "bold", 0, "%s",
	         levels ? "Mean accuracy of a method (validation; test reads)" : "Differences between methods (paired over seeds)");
	svg_rect(s, ax.x0, ax.y0, ax.w, ax.h, "#fbfbfb", "#888");
	int xd = step_decimals(ax.xstep);
	for (double v = ax.xmin; v <= ax.xmax + ax.xstep * 1e-6; v += ax.xstep) {
		double x = ax_x(&ax, v), vv = fabs(v) < ax.xstep * 1e-9 ? 0 : v;
		svg_line(s, x, ax.y0, x, ax.y0 + ax.h, "#e3e3e3", 1, NULL);
		svg_line(s, x, ax.y0 + ax.h, x, ax.y0 + ax.h + 5, "#444", 1, NULL);
		svg_text(s, x, ax.y0 + ax.h + 19, 12, "middle", NULL, 0, "%s%.*f", vv > 0 ? "+" : vv < 0 ? MINUS : "",
		         xd, fabs(vv));
	}
	svg_line(s, ax_x(&ax, 0), ax.y0, ax_x(&ax, 0), ax.y0 + ax.h, "#555", 1.2, "5,4");
	svg_text(s, ax.x0 + ax.w / 2, ax.y0 + ax.h + 38, 13, "middle", NULL, 0,
	         "ours " MINUS " published (percentage points of accuracy)");
	int row = 0;
	for (int i = 0; i < a->n_pub; i++) {
		const struct pub_result *r = &a->pub[i];
		if (!pub_in_panel(d, r, levels))
			continue;
		const struct published *p = &d->pubs[r->pub];
		double y = ax.y0 + (row + 0.5) * ROW, v = p->value;
		if (row++ % 2)
			svg_rect(s, 10, y - ROW / 2, ax.x0 - 14, ROW, "#f1f1f1", NULL);
		const char *c = pub_inside(r, p) ? "#000000" : "#D55E00";
		char lab[256], what[128];
		group_label(d, r->group, lab, sizeof lab);
		if (p->quantity == PUB_MEAN)
			snprintf(what, sizeof what, "%s", method_display(p->method));
		else if (p->quantity == PUB_TEST_MEAN)
			snprintf(what, sizeof what, "%s, test read", method_display(p->method));
		else if (p->quantity == PUB_DELTA)
			snprintf(what, sizeof what, "%s " MINUS " %s", method_display(p->method), o->baseline);
		else if (p->quantity == PUB_BEST_DELTA)
			snprintf(what, sizeof what, "best (%s) " MINUS " %s", method_display(d->methods.s[r->method]),
			         o->baseline);
		else
			snprintf(what, sizeof what, "%s " MINUS " %s within %d epochs", method_display(p->method),
			         o->baseline, p->budget);
		svg_text(s, ax.x0 - 8, y + 4.5, 12, "end", NULL, 0, "%s: %s [%s%.4f]", task_display(lab), what,
		         v > 0 && !pub_is_mean(p->quantity) ? "+" : v < 0 ? MINUS : "", fabs(v));
		svg_line(s, ax_x(&ax, 100 * (r->lo - v)), y, ax_x(&ax, 100 * (r->hi - v)), y, c, 2.2, NULL);
		svg_circle(s, ax_x(&ax, 100 * (r->ours - v)), y, 3.5, c);
	}
	return 22 + ax.h + 52;
}

/* Two panels (means; differences), each row one published value we measured, in the table's
 * order; black when our interval holds the published value, vermillion when not. */
int plot_published(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                   struct sb_err *err)
{
	int nl = 0, nd = 0;
	for (int i = 0; i < a->n_pub; i++) {
		nl += pub_in_panel(d, &a->pub[i], 1);
		nd += pub_in_panel(d, &a->pub[i], 0);
	}
	const double LABEL_W = 420, PLOT_W = 440, W = LABEL_W + PLOT_W + 40, ROW = 20;
	double H = 40 + (nl ? 74 + nl * ROW : 0) + (nd ? 74 + nd * ROW : 0) + 40;
	struct svg s;
	int rc = svg_begin(&s, W, H, err);
	if (rc)
		return rc;
	svg_text(&s, W / 2, 22, 14, "middle", "bold", 0, "Ours against the published values (%d)", nl + nd);
	double y = 34;
	y += published_panel(&s, d, a, o, 1, y, LABEL_W, PLOT_W);
	published_panel(&s, d, a, o, 0, y, LABEL_W, PLOT_W);
	svg_text(&s, 20, H - 24, 12, "start", NULL, 0,
	         "Each row: our mean (dot) and %.0f%% percentile bootstrap CI over seeds (bar) minus the published value "
	         "[in brackets];",
	         100 * o->level);
	svg_text(&s, 20, H - 9, 12, "start", NULL, 0,
	         "the dashed line is the published value. Black: our interval holds it; orange: it does not (our seeds' "
	         "noise only).");
	return svg_end(&s, path, err);
}
