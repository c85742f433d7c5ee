# pipelines/sas.mk — make sas: PROTOCOL B's SAS reproduction (docs/sas.md).
#
#   make sas                        train seeds 42-44, evaluate, report -> out/sas/report.md
#   make sas SAS_CORPUS=NAME=PATH   another corpus (default: DATA/wikitext2 when sb-fetch has
#                                   fetched it, else Tiny Shakespeare, said loudly in the report)
#   make sas SAS_OUT=DIR SAS_SEEDS="42" SAS_CELL_EXTRA='"pre_steps":5,'   (tests)
#
# Files: SAS_OUT/cells.ndjson (rewritten only when its content changes),
# SAS_OUT/train.ndjson (sb-train's records), SAS_OUT/runs/sas-sSEED/ (run directories),
# SAS_OUT/eval.ndjson (sb-eval's records: run.meta, one sas.eval per seed),
# SAS_OUT/report.md (per seed, mean and sd, next to the published numbers).
SB_OUT  ?= out
SB_DATA ?= data
SB_BIN  ?= bin
SAS_OUT   ?= $(SB_OUT)/sas
SAS_SEEDS ?= 42 43 44
SAS_CELL_EXTRA ?=
SAS_TS_CANDIDATES := $(SB_DATA)/tinyshakespeare/input.txt $(SB_DATA)/tinyshakespeare \
                     ../shared/data/tinyshakespeare/input.txt /work/shared/data/tinyshakespeare/input.txt
SAS_CORPUS ?= $(if $(wildcard $(SB_DATA)/wikitext2/train.safetensors),wikitext2=$(SB_DATA)/wikitext2,$(addprefix tinyshakespeare=,$(firstword $(wildcard $(SAS_TS_CANDIDATES)))))

.PHONY: sas sas-clean
sas: $(SAS_OUT)/report.md
	@echo "sas: $(SAS_OUT)/report.md" >&2

$(SAS_OUT)/cells.ndjson: FORCE
	@if [ -z "$(SAS_CORPUS)" ]; then echo "sas: no corpus: fetch wikitext2 (bin/sb-fetch -o $(SB_DATA) wikitext2) or give SAS_CORPUS=NAME=PATH" >&2; exit 3; fi
	@mkdir -p $(@D)
	@$(ATOMIC) { for s in $(SAS_SEEDS); do \
	     printf '{"family":"sas","id":"sas-s%s","seed":%s,%s"corpus":"%s"}\n' "$$s" "$$s" '$(SAS_CELL_EXTRA)' '$(SAS_CORPUS)'; \
	   done; } > $@.tmp && \
	 if [ -f $@ ] && cmp -s $@ $@.tmp; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(SAS_OUT)/train.ndjson: $(SAS_OUT)/cells.ndjson | $(SB_BIN)/sb-train
	$(ATOMIC) $(SB_BIN)/sb-train -q -o $(SAS_OUT)/runs $< > $@.tmp && mv $@.tmp $@

$(SAS_OUT)/eval.ndjson: $(SAS_OUT)/train.ndjson | $(SB_BIN)/sb-eval
	$(ATOMIC) $(SB_BIN)/sb-eval -q $(foreach s,$(SAS_SEEDS),$(SAS_OUT)/runs/sas-s$(s)) > $@.tmp && mv $@.tmp $@

$(SAS_OUT)/report.md: $(SAS_OUT)/eval.ndjson pipelines/sas-report.sh
	$(ATOMIC) pipelines/sas-report.sh $< > $@.tmp && mv $@.tmp $@

sas-clean:
	rm -rf $(SAS_OUT)

# ---- make sas-scaled: SAS beyond the toy (docs/sas.md, lib/sas_scaled.h) ----
#   make sas-scaled                       train a small LM-track decoder (ACAC, d 64, T 512,
#                                         5000 steps, ~10 min on one core), selectors at
#                                         blocks 8/16/64 (~6 min), compare (~5 min)
#                                         -> out/sas-scaled/report.md
#   make sas-scaled SAS_BACKBONE=RUN_DIR  use an LM-track run instead (e.g. make lm's)
#   SAS_SCALED_EXTRA='"sel_steps":50,"probes":4,'   cell fields (lib/sas_scaled.h)
SAS_SCALED_OUT ?= $(SB_OUT)/sas-scaled
SAS_BACKBONE ?=
SAS_SCALED_EXTRA ?=
SAS_BB_STEPS ?= 5000
SAS_BB_WARM ?= 4000
SAS_BB_MIX ?= tinyshakespeare=0.3,kv_recall=0.4,retrieval=0.3
SAS_TS := $(firstword $(wildcard $(SAS_TS_CANDIDATES)))
SAS_BB_CELL = {"family":"lm","seed":0,"model":{"d":64,"pattern":"ACAC","heads":4,"ffn":256,"pos":"rope","conv_gate":0},"T":512,"batch":8,"steps":$(SAS_BB_STEPS),"warmup":50,"lr":0.003,"lr_min":0.0003,"warm_T":64,"warm_steps":$(SAS_BB_WARM),"log_every":25,"corpora":["tinyshakespeare=$(abspath $(SAS_TS))"],"mixture":"$(SAS_BB_MIX)","haystack":"tinyshakespeare"}

SAS_BB_GIVEN := {"kind":"lm.train","v":1,"run_dir":"%s","status":"given"}

.PHONY: sas-scaled
sas-scaled: $(SAS_SCALED_OUT)/report.md
	@echo "sas-scaled: $(SAS_SCALED_OUT)/report.md" >&2

$(SAS_SCALED_OUT)/backbone-cell.ndjson: FORCE
	@mkdir -p $(@D)
	@test -n "$(SAS_BACKBONE)$(SAS_TS)" || { echo "sas-scaled: no Tiny Shakespeare for the backbone; set SAS_BACKBONE=RUN_DIR" >&2; exit 3; }
	@$(ATOMIC) printf '%s\n' '$(SAS_BB_CELL)' > $@.tmp && \
	 if [ -f $@ ] && cmp -s $@ $@.tmp; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(SAS_SCALED_OUT)/backbone.ndjson: $(if $(SAS_BACKBONE),,$(SAS_SCALED_OUT)/backbone-cell.ndjson) | $(SB_BIN)/sb-lm
	@mkdir -p $(@D)
	$(ATOMIC) if [ -n '$(SAS_BACKBONE)' ]; then printf '$(SAS_BB_GIVEN)\n' '$(SAS_BACKBONE)'; \
	else $(SB_BIN)/sb-lm train -q -j 1 -o $(SAS_SCALED_OUT)/backbone $(SAS_SCALED_OUT)/backbone-cell.ndjson; fi > $@.tmp && \
	mv $@.tmp $@

$(SAS_SCALED_OUT)/cells.ndjson: $(SAS_SCALED_OUT)/backbone.ndjson FORCE
	@$(ATOMIC) run=$$(sed -n 's/.*"kind":"lm.train".*"run_dir":"\([^"]*\)".*/\1/p' $< | tail -n 1); \
	 test -n "$$run" || { echo "sas-scaled: no backbone run directory in $<" >&2; exit 3; }; \
	 printf '{"family":"sas","id":"sas-scaled","seed":0,%s"backbone":"%s"}\n' '$(SAS_SCALED_EXTRA)' "$$run" > $@.tmp && \
	 if [ -f $@ ] && cmp -s $@ $@.tmp; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(SAS_SCALED_OUT)/train.ndjson: $(SAS_SCALED_OUT)/cells.ndjson | $(SB_BIN)/sb-train
	$(ATOMIC) $(SB_BIN)/sb-train -q -o $(SAS_SCALED_OUT)/runs $< > $@.tmp && mv $@.tmp $@

$(SAS_SCALED_OUT)/eval.ndjson: $(SAS_SCALED_OUT)/train.ndjson | $(SB_BIN)/sb-eval
	$(ATOMIC) $(SB_BIN)/sb-eval -q $(SAS_SCALED_OUT)/runs/sas-scaled > $@.tmp && mv $@.tmp $@

$(SAS_SCALED_OUT)/report.md: $(SAS_SCALED_OUT)/eval.ndjson pipelines/sas-scaled-report.sh
	$(ATOMIC) pipelines/sas-scaled-report.sh $(SAS_SCALED_OUT)/runs/sas-scaled/eval.ndjson $(SAS_SCALED_OUT)/runs/sas-scaled/train.ndjson > $@.tmp && mv $@.tmp $@
