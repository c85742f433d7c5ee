# pipelines/n3a.mk — PROTOCOL A8's N3-A synthetic intervention assay, the runs (docs/n3a.md).
#
#   make n3a            every cell of the registered grid: 2 archs x 4 r x 64 seeds = 512
#                       blocks of 12 units, one sb-train process per cell (parallel with -j):
#                       $(N3A_OUT)/runs/CELL_ID/{cell.json,n3a.ndjson} and the summary
#                       $(N3A_OUT)/n3a-train.ndjson (one n3a.train record per cell)
#   make n3a-verdict    then the analysis, sb-a8 n3a over every cell's n3a.ndjson:
#                       $(N3A_OUT)/n3a-verdict.ndjson (components, families, verdict) and
#                       $(N3A_OUT)/n3a-verdict.md (beside the published outcome)
#   make n3a-interim    while the grid runs: sb-a8 n3a --interim over the cells finished so
#                       far, each architecture's components over its complete seeds, not a
#                       decision: $(N3A_OUT)/n3a-interim.{ndjson,md}
#   make n3a-clean      remove $(N3A_OUT)
#
# Variables: N3A_OUT ($(SB_OUT)/n3a, out/n3a by default), N3A_ARCHS (query transformer), N3A_RS (1 4 16 24),
# N3A_SEEDS (64000..64063), N3A_CELL_EXTRA (fields appended to every cell, e.g.
# ,"updates":64,"eval_steps":[0,8,16,32,40,64],"parents":[8,32],"fork_updates":8 for a
# small trial; the cell id changes with them, so such runs never mix with registered ones).
# A finished cell is skipped by sb-train itself; a failed guard stops make (no seed is
# replaced: PROTOCOL A8); make -k runs the others. The analysis: sb-a8 n3a (docs/sb-a8.md).
SB_OUT ?= out
N3A_OUT ?= $(SB_OUT)/n3a
N3A_ARCHS ?= query transformer
N3A_RS ?= 1 4 16 24
N3A_SEEDS ?= $(shell seq 64000 64063)
N3A_CELL_EXTRA ?=

# seed by seed (both archs, all r of a seed before the next), so that a grid stopped or still
# running has whole seeds for make n3a-interim
N3A_KEYS := $(foreach s,$(N3A_SEEDS),$(foreach a,$(N3A_ARCHS),$(foreach r,$(N3A_RS),$(a)-r$(r)-s$(s))))
N3A_STAMPS := $(N3A_KEYS:%=$(N3A_OUT)/train/%.ndjson)

.PHONY: n3a n3a-verdict n3a-interim n3a-clean
n3a: $(N3A_OUT)/n3a-train.ndjson
n3a-verdict: $(N3A_OUT)/n3a-verdict.ndjson

# the extra fields, rewritten only when they change (so a change reruns every cell's stamp;
# sb-train still skips the cells whose id, i.e. content, is unchanged)
$(N3A_OUT)/cell-extra.txt: FORCE
	@mkdir -p $(N3A_OUT)
	@$(ATOMIC) v='$(N3A_CELL_EXTRA)'; if [ ! -f $@ ] || [ "$$(cat $@)" != "$$v" ]; then printf '%s\n' "$$v" >$@.tmp && mv $@.tmp $@; fi

# one cell: its one-line cell file, then sb-train's stdout (run.meta + n3a.train) as the stamp
$(N3A_OUT)/train/%.ndjson: $(N3A_OUT)/cell-extra.txt | $(BIN)/sb-train
	@mkdir -p $(N3A_OUT)/cells $(N3A_OUT)/train
	@$(ATOMIC) k='$*'; a=$${k%%-*}; rest=$${k#*-r}; r=$${rest%%-*}; s=$${k##*-s}; \
	 printf '{"family":"n3a","arch":"%s","r":%s,"seed":%s%s}\n' "$$a" "$$r" "$$s" '$(N3A_CELL_EXTRA)' \
	   >$(N3A_OUT)/cells/$*.ndjson; \
	 $(BIN)/sb-train -q -o $(N3A_OUT)/runs $(N3A_OUT)/cells/$*.ndjson >$@.tmp && \
	 mv $@.tmp $@

$(N3A_OUT)/n3a-train.ndjson: $(N3A_STAMPS)
	@$(ATOMIC) cat $^ | grep '"kind":"n3a.train"' >$@.tmp && mv $@.tmp $@
	@echo "n3a: $$(grep -c '"status":"completed"\|"status":"skipped"' $@) of $(words $(N3A_STAMPS)) cells done: $(N3A_OUT)/runs" >&2

# the analysis reads the cells of this grid (their run directories, named in the stamps)
$(N3A_OUT)/n3a-verdict.ndjson: $(N3A_OUT)/n3a-train.ndjson | $(BIN)/sb-a8
	@$(call atomic,$@.tmp $@.files) \
	 sed -n 's/.*"run_dir":"\([^"]*\)".*/\1\/n3a.ndjson/p' $< >$@.files; \
	 $(BIN)/sb-a8 -q n3a --md $(N3A_OUT)/n3a-verdict.md $$(cat $@.files) >$@.tmp && \
	 mv $@.tmp $@
	@echo "n3a: $$(grep -o '"verdict":"[A-Z_]*"' $@) ($(N3A_OUT)/n3a-verdict.md)" >&2

# an interim look at the cells finished so far (the stamps present); always rerun
n3a-interim: | $(BIN)/sb-a8
	@$(call atomic,$(N3A_OUT)/n3a-interim.ndjson.tmp) \
	 f=$$(cat /dev/null $(wildcard $(N3A_STAMPS)) | sed -n 's/.*"run_dir":"\([^"]*\)".*/\1\/n3a.ndjson/p'); \
	 [ -n "$$f" ] || { echo "n3a-interim: no finished cell in $(N3A_OUT)/train" >&2; exit 3; }; \
	 $(BIN)/sb-a8 -q n3a --interim --md $(N3A_OUT)/n3a-interim.md $$f >$(N3A_OUT)/n3a-interim.ndjson.tmp && \
	 mv $(N3A_OUT)/n3a-interim.ndjson.tmp $(N3A_OUT)/n3a-interim.ndjson
	@echo "n3a-interim: $(N3A_OUT)/n3a-interim.md (not a decision)" >&2

n3a-clean:
	rm -rf $(N3A_OUT)
