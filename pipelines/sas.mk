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
	@{ for s in $(SAS_SEEDS); do \
	     printf '{"family":"sas","id":"sas-s%s","seed":%s,%s"corpus":"%s"}\n' "$$s" "$$s" '$(SAS_CELL_EXTRA)' '$(SAS_CORPUS)'; \
	   done; } > $@.tmp
	@if [ -f $@ ] && cmp -s $@ $@.tmp; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(SAS_OUT)/train.ndjson: $(SAS_OUT)/cells.ndjson $(SB_BIN)/sb-train
	$(SB_BIN)/sb-train -q -o $(SAS_OUT)/runs $< > $@.tmp
	@mv $@.tmp $@

$(SAS_OUT)/eval.ndjson: $(SAS_OUT)/train.ndjson $(SB_BIN)/sb-eval
	$(SB_BIN)/sb-eval -q $(foreach s,$(SAS_SEEDS),$(SAS_OUT)/runs/sas-s$(s)) > $@.tmp
	@mv $@.tmp $@

$(SAS_OUT)/report.md: $(SAS_OUT)/eval.ndjson pipelines/sas-report.sh
	pipelines/sas-report.sh $< > $@.tmp
	@mv $@.tmp $@

sas-clean:
	rm -rf $(SAS_OUT)
