/* table.c — a small table of strings rendered as Markdown, CSV (RFC 4180) or LaTeX. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p) {
		fputs("sb-stats: out of memory\n", stderr);
		exit(SB_EINTERNAL);
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		fputs("sb-stats: out of memory\n", stderr);
		exit(SB_EINTERNAL);
	}
	return q;
}

struct table *table_new(const char *name, const char *title, int ncols)
{
	struct table *t = xrealloc(NULL, sizeof *t);
	memset(t, 0, sizeof *t);
	t->name = name;
	t->title = xstrdup(title);
	t->ncols = ncols;
	t->head = xrealloc(NULL, (size_t)ncols * sizeof *t->head);
	t->align = xrealloc(NULL, (size_t)ncols * sizeof *t->align);
	for (int c = 0; c < ncols; c++) {
		t->head[c] = xstrdup("");
		t->align[c] = ALIGN_LEFT;
	}
	return t;
}

void table_head(struct table *t, int col, const char *text, enum table_align al)
{
	free(t->head[col]);
	t->head[col] = xstrdup(text);
	t->align[col] = al;
}

int table_row(struct table *t)
{
	if (t->nrows == t->caprows) {
		t->caprows = t->caprows ? 2 * t->caprows : 16;
		t->cells = xrealloc(t->cells, (size_t)t->caprows * t->ncols * sizeof *t->cells);
	}
	for (int c = 0; c < t->ncols; c++)
		t->cells[(size_t)t->nrows * t->ncols + c] = xstrdup("");
	return t->nrows++;
}

void table_set(struct table *t, int row, int col, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	char **cell = &t->cells[(size_t)row * t->ncols + col];
	free(*cell);
	*cell = xstrdup(buf);
}

void table_note(struct table *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	free(t->note);
	t->note = xstrdup(buf);
}

void table_drop_col(struct table *t, int col)
{
	free(t->head[col]);
	for (int r = 0; r < t->nrows; r++)
		free(t->cells[(size_t)r * t->ncols + col]);
	/* compact row by row */
	size_t w = 0;
	for (int r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++)
			if (c != col)
				t->cells[w++] = t->cells[(size_t)r * t->ncols + c];
	for (int c = col; c + 1 < t->ncols; c++) {
		t->head[c] = t->head[c + 1];
		t->align[c] = t->align[c + 1];
	}
	t->ncols--;
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (int c = 0; c < t->ncols; c++)
		free(t->head[c]);
	for (size_t i = 0; i < (size_t)t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->head);
	free(t->align);
	free(t->cells);
	free(t->title);
	free(t->note);
	free(t);
}

static const char *cell(const struct table *t, int r, int c)
{
	return t->cells[(size_t)r * t->ncols + c];
}

/* ---- Markdown ---- */

static void md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else
			fputc(*s, f);
	}
}

void table_write_md(const struct table *t, FILE *f)
{
	fprintf(f, "### %s\n\n|", t->title);
	for (int c = 0; c < t->ncols; c++) {
		fputc(' ', f);
		md_text(f, t->head[c]);
		fputs(" |", f);
	}
	fputs("\n|", f);
	for (int c = 0; c < t->ncols; c++)
		fputs(t->align[c] == ALIGN_RIGHT ? " ---: |" : " --- |", f);
	fputc('\n', f);
	for (int r = 0; r < t->nrows; r++) {
		fputc('|', f);
		for (int c = 0; c < t->ncols; c++) {
			fputc(' ', f);
			md_text(f, cell(t, r, c));
			fputs(" |", f);
		}
		fputc('\n', f);
	}
	if (t->note)
		fprintf(f, "\n%s\n", t->note);
}

/* ---- CSV ---- */

static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void table_write_csv(const struct table *t, FILE *f)
{
	for (int c = 0; c < t->ncols; c++) {
		if (c)
			fputc(',', f);
		csv_field(f, t->head[c]);
	}
	fputs("\r\n", f);
	for (int r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c)
				fputc(',', f);
			csv_field(f, cell(t, r, c));
		}
		fputs("\r\n", f);
	}
}

/* ---- LaTeX ---- */

static void tex_text(FILE *f, const char *s)
{
	const char *start = s;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		switch (ch) {
		case '&':
		case '%':
		case '$':
		case '#':
		case '_':
		case '{':
		case '}':
			fputc('\\', f);
			fputc(ch, f);
			break;
		case '~':
			fputs("\\textasciitilde{}", f);
			break;
		case '^':
			fputs("\\textasciicircum{}", f);
			break;
		case '\\':
			fputs("\\textbackslash{}", f);
			break;
		case '<':
			fputs("\\textless{}", f);
			break;
		case '>':
			fputs("\\textgreater{}", f);
			break;
		case '*':
			if (s[1] == 0) { /* the Holm mark */
				fputs("$^{*}$", f);
				break;
			}
			fputc('*', f);
			break;
		case '-': /* a leading minus of a number: a real minus sign */
			if (((s[1] >= '0' && s[1] <= '9') || s[1] == '.') &&
			    (s == start || s[-1] == ' ' || s[-1] == '[' || s[-1] == '(')) {
				fputs("$-$", f);
				break;
			}
			fputc('-', f);
			break;
		default:
			/* UTF-8 en/em dash and the "no value" dash */
			if (ch == 0xE2 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] == 0x94) {
				fputs("---", f);
				s += 2;
			} else if (ch == 0xE2 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] == 0x93) {
				fputs("--", f);
				s += 2;
			} else if (ch == 0xCE && (unsigned char)s[1] == 0x94) {
				fputs("$\\Delta$", f);
				s += 1;
			} else {
				fputc(ch, f);
			}
		}
	}
}

void table_write_tex(const struct table *t, FILE *f)
{
	fputs("% ", f);
	for (const char *s = t->title; *s; s++)
		fputc(*s == '\n' ? ' ' : *s, f);
	fputs("\n\\begin{tabular}{", f);
	for (int c = 0; c < t->ncols; c++)
		fputc(t->align[c] == ALIGN_RIGHT ? 'r' : 'l', f);
	fputs("}\n\\hline\n", f);
	for (int c = 0; c < t->ncols; c++) {
		if (c)
			fputs(" & ", f);
		tex_text(f, t->head[c]);
	}
	fputs(" \\\\\n\\hline\n", f);
	for (int r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c)
				fputs(" & ", f);
			tex_text(f, cell(t, r, c));
		}
		fputs(" \\\\\n", f);
	}
	fputs("\\hline\n\\end{tabular}\n", f);
	if (t->note) {
		fputs("% ", f);
		fputs(t->note, f);
		fputc('\n', f);
	}
}
