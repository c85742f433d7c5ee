# pipelines/lm-track.mk — the LM track of PROTOCOL C: `make lm` (hooked in by pipelines/lm.mk).
#
#   make lm               train the demo hybrid decoder on Tiny Shakespeare + the Jargon File
#                         + the synthetic retrieval mixture (sb-train), evaluate every mask
#                         (sb-eval: fidelity, the 13-task retrieval battery, budgets, kernel
#                         timings), and write the report (sb-lm report):
#                         $(LM_OUT)/report/lm-report.md (+ SVG figures), and sb-stats' tables
#                         of the probe outcomes in $(LM_OUT)/stats/.
#   make lm-train | lm-eval | lm-report   one stage
#   make lm-clean         remove $(LM_OUT)
#
# Variables: LM_OUT (out/lm), LM_THREADS (2), LM_EVAL_SET (evaluation settings KEY=VALUE
# passed to `sb-eval --set`, e.g. "probes=40 windows=32"; docs/lm.md), LM_STEPS,
# LM_WARM_STEPS, LM_WARM_T, LM_D, LM_PATTERN, LM_T, LM_BATCH, LM_SEED, LM_CKPT_EVERY
# (the demo cell: docs/lm.md), LM_SHAKESPEARE and LM_JARGON
# (corpus sources: an sb-fetch corpus directory DATA/NAME, or the text file).
# Corpora: sb-fetch's directories $(SB_DATA)/tinyshakespeare and $(SB_DATA)/jargon when
# they exist; otherwise the files sb-fetch would read (the shared Tiny Shakespeare copy,
# Debian's jargon-text), cut the same way (0.9 / 0.05 / 0.05). See docs/lm.md.
SB_DATA ?= data
SB_OUT ?= out
LM_OUT ?= $(SB_OUT)/lm
LM_THREADS ?= 2
LM_EVAL_SET ?=
LM_STEPS ?= 4500
LM_WARM_STEPS ?= 3000
LM_WARM_T ?= 64
LM_D ?= 64
LM_PATTERN ?= ACLACL
LM_T ?= 512
LM_BATCH ?= 16
LM_SEED ?= 0
LM_CKPT_EVERY ?= 500
LM_SHAKESPEARE ?= $(firstword $(patsubst %/train.safetensors,%,$(wildcard $(SB_DATA)/tinyshakespeare/train.safetensors)) \
                  $(wildcard ../shared/data/tinyshakespeare/input.txt) $(wildcard /work/shared/data/tinyshakespeare/input.txt))
LM_JARGON ?= $(firstword $(patsubst %/train.safetensors,%,$(wildcard $(SB_DATA)/jargon/train.safetensors)) \
             $(wildcard /usr/share/doc/jargon-text/jargon.txt.gz))

LM_CELL_JSON = {"family":"lm","seed":$(LM_SEED),"model":{"d":$(LM_D),"pattern":"$(LM_PATTERN)","heads":4,"lin_heads":4,"ffn":$(shell echo $$(( 4 * $(LM_D) ))),"pos":"rope","conv_gate":0},"T":$(LM_T),"batch":$(LM_BATCH),"steps":$(LM_STEPS),"warmup":100,"lr":0.003,"lr_min":0.0003,"warm_T":$(LM_WARM_T),"warm_steps":$(LM_WARM_STEPS),"log_every":25,"ckpt_every":$(LM_CKPT_EVERY),"corpora":["tinyshakespeare=$(abspath $(LM_SHAKESPEARE))"$(if $(LM_JARGON),$(comma)"jargon=$(abspath $(LM_JARGON))")],"mixture":"tinyshakespeare=0.2$(if $(LM_JARGON),$(comma)jargon=0.1),kv_recall=0.4,qa_recall=0.1,retrieval=0.2","haystack":"tinyshakespeare"}
comma := ,

.PHONY: lm lm-train lm-eval lm-report lm-clean
lm: $(LM_OUT)/report/lm-report.md
lm-train: $(LM_OUT)/train.ndjson
lm-eval: $(LM_OUT)/eval/eval.ndjson
lm-report: lm

# The cell, rewritten only when its content changes (so make reruns only what it must).
$(LM_OUT)/cell.ndjson: FORCE
	@mkdir -p $(@D)
	@test -n "$(LM_SHAKESPEARE)" || { echo "lm: no Tiny Shakespeare (sb-fetch tinyshakespeare, or set LM_SHAKESPEARE)" >&2; exit 2; }
	@$(ATOMIC) printf '%s\n' '$(LM_CELL_JSON)' >$@.tmp && \
	 if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# sb-train hands the "family": "lm" cell to the LM track (train/train_lm.c); the run's
# train.ndjson ends in train.done with train_seconds (wall) and train_cpu_seconds.
$(LM_OUT)/train.ndjson: $(LM_OUT)/cell.ndjson | bin/sb-train
	$(ATOMIC) bin/sb-train -j $(LM_THREADS) -o $(LM_OUT)/runs $< >$@.tmp; \
	grep -q '"kind":"lm.train".*"status":"\(completed\|skipped\)"' $@.tmp; \
	run=$$(sed -n 's/.*"kind":"lm.train".*"run_dir":"\([^"]*\)".*/\1/p' $@.tmp | tail -n 1); \
	sed -n 's/.*"kind":"train.done".*"train_seconds":\([0-9.]*\),"train_cpu_seconds":\([0-9.]*\).*/lm: trained in \1 s wall-clock, \2 s CPU (user+sys)/p' $$run/train.ndjson >&2; \
	mv $@.tmp $@

# sb-eval hands the run directory to the LM track (evalsel/eval_lm.c): RUN/eval.ndjson.
# $(call lm_eval,KIND): the run directory is the last KIND record's run_dir in $<.
define lm_eval
	$(call atomic,$@.tmp $(@D)/sb-eval.ndjson.tmp) \
	run=$$(sed -n 's/.*"kind":"$(1)".*"run_dir":"\([^"]*\)".*/\1/p' $< | tail -n 1); \
	(cd $$run && sha256sum -c --quiet model.safetensors.sha256); \
	mkdir -p $(@D); \
	bin/sb-eval -j $(LM_THREADS) $(addprefix --set ,$(LM_EVAL_SET)) $$run >$(@D)/sb-eval.ndjson.tmp; \
	mv $(@D)/sb-eval.ndjson.tmp $(@D)/sb-eval.ndjson; \
	cp $$run/eval.ndjson $@.tmp && mv $@.tmp $@
endef
$(LM_OUT)/eval/eval.ndjson: $(LM_OUT)/train.ndjson | bin/sb-eval
	$(call lm_eval,lm.train)

# The report (Markdown + SVG: sb-lm report, the LM track's own tables and figures) and
# sb-stats' tables of the probe outcomes (Wilson, McNemar, Holm) against dense.
# $(call lm_report,OUT_DIR,NAME)
define lm_report
	bin/sb-lm report -o $(@D) $<
	bin/sb-stats -q --baseline dense --all-pairs -o $(1)/stats $< >/dev/null
	@echo "$(2): report in $@" >&2
endef
$(LM_OUT)/report/lm-report.md: $(LM_OUT)/eval/eval.ndjson | bin/sb-lm bin/sb-stats
	$(call lm_report,$(LM_OUT),lm)

lm-clean:
	rm -rf $(LM_OUT)

# A pretrained decoder through the same protocol (PROTOCOL C(b); docs/lm.md "Pretrained
# decoders"):
#   make lm-pretrained LM_HF=DIR      import the Hugging Face directory DIR (sb-lm import),
#                                     evaluate it in its tokenizer's tokens (sb-eval), report
#                                     (sb-lm report, sb-stats) into $(LM_PT_OUT)
# Variables: LM_HF (required), LM_PT_OUT (out/lm-pretrained), LM_PT_T (the context in
# tokens, 512), LM_PT_CORPUS (NAME=PATH of the held-out text; default Tiny Shakespeare),
# LM_EVAL_SET and LM_THREADS as above. The import depends on every file of DIR it reads, so
# another checkpoint or tokenizer reruns everything (it is another run directory).
LM_HF ?=
LM_PT_OUT ?= $(SB_OUT)/lm-pretrained
LM_PT_T ?= 512
LM_PT_CORPUS ?= tinyshakespeare=$(abspath $(LM_SHAKESPEARE))

.PHONY: lm-pretrained
lm-pretrained: $(LM_PT_OUT)/report/lm-report.md

$(LM_PT_OUT)/import.ndjson: $(wildcard $(LM_HF)/config.json $(LM_HF)/*.safetensors $(LM_HF)/model.safetensors.index.json \
                             $(LM_HF)/tokenizer.json) | bin/sb-lm
	@test -n "$(LM_HF)" && test -f "$(LM_HF)/config.json" || \
		{ echo "lm-pretrained: set LM_HF to a Hugging Face model directory (config.json, weights, tokenizer.json)" >&2; exit 2; }
	@mkdir -p $(@D)
	$(ATOMIC) bin/sb-lm import -q -o $(LM_PT_OUT)/runs --T $(LM_PT_T) --corpus "$(LM_PT_CORPUS)" "$(LM_HF)" >$@.tmp && \
	mv $@.tmp $@

$(LM_PT_OUT)/eval/eval.ndjson: $(LM_PT_OUT)/import.ndjson | bin/sb-eval
	$(call lm_eval,lm.import)

$(LM_PT_OUT)/report/lm-report.md: $(LM_PT_OUT)/eval/eval.ndjson | bin/sb-lm bin/sb-stats
	$(call lm_report,$(LM_PT_OUT),lm-pretrained)
