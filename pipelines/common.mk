# pipelines/common.mk — the machinery every pipeline shares (included once).
#
# A grid (pipelines/grids/NAME.grid, docs/pipelines.md) is expanded by scripts/grid
# into $(SB_OUT)/NAME/.grid/cells.mk, which this file includes only when a goal
# needs that grid, and which calls sb_block for each block to make its rules:
#
#   $(SB_DATA)/TASK/{pool,test}.safetensors    sb-fetch            (shared by all grids)
#   OUT/NAME/BLOCK/cells/KEY/cell.json         the cell's parameters (rewritten only on change)
#   OUT/NAME/BLOCK/cells/KEY/train.ndjson      sb-train  -> runs/CELL_ID/ (link + sidecar)
#   OUT/NAME/BLOCK/cells/KEY/val.ndjson        sb-eval   -> runs/CELL_ID/val.ndjson
#   OUT/NAME/BLOCK/selection.json              sb-freeze  (stage freeze)
#   OUT/NAME/BLOCK/test/test.ndjson            sb-test    (stage test)
#   OUT/NAME/BLOCK/stats/stats.ndjson          sb-stats   (stage stats: tables, figures)
#   OUT/NAME/report.md                         the grid's report
#
# Every recipe is a call to pipelines/stage.sh, which first verifies the SHA-256
# sidecars of the recipe's inputs and refuses, naming the file, when one changed.
ifndef SB_PIPE_COMMON
SB_PIPE_COMMON := 1

SB_OUT      ?= out
SB_DATA     ?= data
SB_CACHE    ?= $(SB_DATA)/.cache
SB_MIRRORS  ?= /usr/share/datasets/fashion-mnist
SB_BIN      ?= bin
TRAIN_THREADS ?= 1
SCHEDULER   ?= local
SB_JOBS     ?= $(shell nproc 2>/dev/null || echo 1)
# training on a GPU (docs/pipelines.md, "On a GPU"): DEVICE=cuda[:N][,tf32] trains the
# encoder cells of a block that share task, architecture and tier in one sb-train
# process (at most DEVICE_CELLS at once; 0: all, up to 128), retries the cells of a
# lost device context DEVICE_RETRIES times in a new process, and runs at most
# DEVICE_GROUPS such processes on the device at once; evaluation stays on the CPU
DEVICE      ?= cpu
DEVICE_CELLS ?= 0
DEVICE_RETRIES ?= 2
DEVICE_GROUPS ?= 1
# sb-eval's device (cpu by default, also with DEVICE=cuda: see docs/pipelines.md)
EVAL_DEVICE ?= cpu
# this make's identity: a cell that failed in it is not trained again by it
# (computed once per make; a grid's own sub-make gets it on its command line, and a
# value from the environment, e.g. of a make that runs tests, is not this make's)
ifneq ($(origin SB_MAKE_RUN),command line)
SB_MAKE_RUN := $(shell date -u +%Y%m%dT%H%M%S.%N).$(shell echo $$PPID)
endif
ACCEPT_FAILED ?= 0
# The paths the pipelines write and read become make targets and unquoted words of the
# recipes' shell commands: make splits them at whitespace and gives ':' ';' '%' '=' '#'
# ',' '*' '?' '[' its own meanings, the shell '&' '|' '<' '>' '(' ')' quotes and '\'.
# Such a path is refused here, before anything runs, naming the variable (otherwise: a
# cascade of make warnings and a half-run grid). Goals that only build are not affected.
sb_comma := ,
sb_hash := \#
sb_lparen := (
sb_rparen := )
sb_path_bad := : ; % = * ? [ ] & | < > " ' ` \ $(sb_comma) $(sb_hash) $(sb_lparen) $(sb_rparen)
sb_path_vars := SB_OUT SB_DATA SB_BIN OUTTREE SAS_OUT SAS_SCALED_OUT N3A_OUT LM_OUT LM_PT_OUT
sb_path_vars_opt := LM_HF
sb_build_goals := all check clean deps features help manifest verify lib/version.h bin/% build/% lib/%
sb_path_ok = $(and $(filter 1,$(words $(1))),$(if $(strip $(foreach c,$(sb_path_bad),$(findstring $(c),$(1)))),,1))
ifneq ($(filter-out $(sb_build_goals),$(MAKECMDGOALS)),)
$(foreach v,$(sb_path_vars),$(if $(filter undefined,$(origin $(v))),,$(if $(call sb_path_ok,$($(v))),,$(error $(v)='$($(v))': make cannot work with this path (whitespace, or one of : ; % = * ? [ ] & | < > quotes \ , # ( ) in it, or empty); use a path without them, e.g. a symbolic link to it))))
# inputs that may be left empty (LM_HF: make lm-pretrained says it is needed)
$(foreach v,$(sb_path_vars_opt),$(if $(strip $($(v))),$(if $(call sb_path_ok,$($(v))),,$(error $(v)='$($(v))': make cannot work with this path (whitespace, or one of : ; % = * ? [ ] & | < > quotes \ , # ( ) in it); use a path without them, e.g. a symbolic link to it))))
endif
SB_STAGE    := pipelines/stage.sh
SB_GRID     := scripts/grid
SB_GRIDS    := $(sort $(wildcard pipelines/grids/*.grid) $(EXTRA_GRIDS))
export SB_OUT SB_DATA SB_CACHE SB_MIRRORS SB_BIN TRAIN_THREADS ACCEPT_FAILED REFREEZE RETEST RESUME EXTRA_GRIDS \
       DEVICE DEVICE_CELLS DEVICE_RETRIES DEVICE_GROUPS SB_MAKE_RUN EVAL_DEVICE
export SB_SLURM_PARTITION SB_SLURM_ACCOUNT SB_SLURM_QOS SB_SLURM_TIME SB_SLURM_CPUS SB_SLURM_MEM \
       SB_SLURM_THROTTLE SB_SLURM_MAX_ARRAY SB_SLURM_ARGS SB_SLURM_FORCE

# The programs a stage needs: built by the top Makefile when SB_BIN is bin/.
# Order-only: rebuilding a program does not invalidate finished cells (each
# record's run.meta names the version that made it; see docs/pipelines.md).
# (Only programs the top Makefile can build are prerequisites; stage.sh reports a missing one.)
sb_prog = $(filter $(SB_BIN)/sb-$(1),$(PROGS))

# the programs, built first when they are this tree's (SB_BIN=bin); silently (-s: no
# "'bin/sb-...' is up to date" line per program at the start of every grid; a
# compiler's errors and warnings still show); one job per core unless make was given -j
# (BUILD_JOBS, the top Makefile)
.PHONY: sb-programs
sb-programs:
ifeq ($(SB_BIN),bin)
	@$(MAKE) -s --no-print-directory $(BUILD_JOBS) $(PROGS) >&2
endif

# ---- datasets (one target per task, shared by every grid) ----
$(SB_DATA)/%/pool.safetensors $(SB_DATA)/%/test.safetensors: | $(call sb_prog,fetch)
	@$(SB_STAGE) fetch $*

# ---- the rules of one block: $(call sb_block,GRID,BLOCK) ----
define sb_block
$(1).$(2).DIR   := $(SB_OUT)/$(1)/$(2)
$(1).$(2).TRAIN := $$(patsubst %,$(SB_OUT)/$(1)/$(2)/cells/%/train.ndjson,$$($(1).$(2).KEYS))
$(1).$(2).VAL   := $$(patsubst %,$(SB_OUT)/$(1)/$(2)/cells/%/val.ndjson,$$($(1).$(2).KEYS))
$(1).$(2).FINAL := $$(if $$(filter stats,$$($(1).$(2).STAGES)),$(SB_OUT)/$(1)/$(2)/stats/stats.ndjson,$$(if $$(filter test,$$($(1).$(2).STAGES)),$(SB_OUT)/$(1)/$(2)/test/test.ndjson,$$(if $$(filter freeze,$$($(1).$(2).STAGES)),$(SB_OUT)/$(1)/$(2)/selection.json,$$($(1).$(2).VAL))))
$(1).CELLS += $$($(1).$(2).VAL)
$(1).FINAL += $$($(1).$(2).FINAL) $(SB_OUT)/$(1)/$(2)/params/criteria $(SB_OUT)/$(1)/$(2)/params/cells

$$($(1).$(2).TRAIN): $(SB_OUT)/$(1)/$(2)/cells/%/train.ndjson: $(SB_OUT)/$(1)/$(2)/cells/%/cell.json | $(call sb_prog,train)
	@$(SB_STAGE) train $(SB_OUT)/$(1)/$(2) $$*
$$($(1).$(2).VAL): $(SB_OUT)/$(1)/$(2)/cells/%/val.ndjson: $(SB_OUT)/$(1)/$(2)/cells/%/train.ndjson | $(call sb_prog,eval)
	@$(SB_STAGE) eval $(SB_OUT)/$(1)/$(2) $$*
# (a selection without its sidecar: a freeze killed between sb-freeze's write and the seal; made again)
$(SB_OUT)/$(1)/$(2)/selection.json: $$($(1).$(2).VAL) $(SB_OUT)/$(1)/$(2)/params/freeze $(SB_OUT)/$(1)/$(2)/params/cells $$(if $$(wildcard $(SB_OUT)/$(1)/$(2)/selection.json),$$(if $$(wildcard $(SB_OUT)/$(1)/$(2)/selection.json.sha256),,FORCE)) | $(call sb_prog,freeze)
	@$(SB_STAGE) freeze $(SB_OUT)/$(1)/$(2)
$(SB_OUT)/$(1)/$(2)/test/test.ndjson: $(SB_OUT)/$(1)/$(2)/selection.json $(SB_OUT)/$(1)/$(2)/params/test $$(foreach t,$$($(1).$(2).TASKS),$(SB_DATA)/$$(t)/test.safetensors) | $(call sb_prog,test)
	@$(SB_STAGE) test $(SB_OUT)/$(1)/$(2)
$(SB_OUT)/$(1)/$(2)/stats/stats.ndjson: $$($(1).$(2).VAL) $$(if $$(filter test,$$($(1).$(2).STAGES)),$(SB_OUT)/$(1)/$(2)/test/test.ndjson) $(SB_OUT)/$(1)/$(2)/params/stats $(SB_OUT)/$(1)/$(2)/params/cells | $(call sb_prog,stats)
	@$(SB_STAGE) stats $(SB_OUT)/$(1)/$(2)
endef

# ---- the driver of one grid: $(call sb_grid_targets,GRID) ----
# GRID          every cell, then the block stages and the report, with make -k so
#               that a failed cell stops only what depends on it; ends by listing
#               the failed cells (kept with their records; the next run retries
#               only them). With SCHEDULER=slurm it submits instead (pipelines/slurm.sh).
# GRID-cells    only the cells      GRID-list     print the cells
# GRID-failed   list failed cells   GRID-expand   expand the grid file
# GRID-adopt FROM=DIR   take the finished cells of another grid's tree DIR that are
#               the same cells (the same cell.json): make then trains only the others
# (NAME.mk may add prerequisites, e.g. demo: demo-setup.) Without -j on the command
# line the cells run $(SB_JOBS) at a time (default: every core).
define sb_grid_targets
.PHONY: $(1) $(1)-cells $(1)-cells-run $(1)-data $(1)-final $(1)-final-run $(1)-list $(1)-failed $(1)-expand $(1)-adopt
$(1)-expand: $(SB_OUT)/$(1)/.grid/cells.mk
$(1)-data: $$(sort $$(foreach b,$$($(1).BLOCKS),$$(foreach t,$$($(1).$$(b).TASKS),$(SB_DATA)/$$(t)/pool.safetensors $(SB_DATA)/$$(t)/test.safetensors)))
# (under the grid's lock, as GRID: a make of GRID-cells and one of GRID, or two of
# GRID-cells, would otherwise train the same cells at once; make -n takes no lock)
$(1)-cells: $(SB_OUT)/$(1)/.grid/cells.mk
	+@$$(if $$(findstring n,$$(firstword -$$(MAKEFLAGS))),,$$(call sb_lock,$(1));) $$(MAKE) --no-print-directory SB_MAKE_RUN=$$(SB_MAKE_RUN) $(1)-cells-run
$(1)-cells-run: $$($(1).CELLS)
# GRID-final too: it runs the freeze, test and statistics stages that make GRID runs
# (GRID itself makes GRID-final-run inside its lock; the Slurm final job makes it without one)
$(1)-final: $(SB_OUT)/$(1)/.grid/cells.mk
	+@$$(if $$(findstring n,$$(firstword -$$(MAKEFLAGS))),,$$(call sb_lock,$(1));) $$(MAKE) --no-print-directory SB_MAKE_RUN=$$(SB_MAKE_RUN) $(1)-final-run
$(1)-final-run: $(SB_OUT)/$(1)/report.md
$(SB_OUT)/$(1)/report.md: $$($(1).FINAL)
	@$(SB_STAGE) report $(SB_OUT)/$(1)
$(1)-list: $(SB_OUT)/$(1)/.grid/cells.mk
	@$(SB_GRID) list $(SB_GRIDFILE.$(1))
$(1)-failed:
	@$(SB_STAGE) failed $(SB_OUT)/$(1)
$(1)-adopt: $(SB_OUT)/$(1)/.grid/cells.mk
	@$$(call sb_lock,$(1)); $(SB_STAGE) adopt $(SB_OUT)/$(1) "$$(FROM)"
$(1): $(SB_OUT)/$(1)/.grid/cells.mk sb-programs
ifeq ($(SCHEDULER),slurm)
	+@$$(call sb_lock,$(1)); MAKE='$$(MAKE)' SB_SLURM_AFTER='$$(sb_after_slurm.$(1))' SB_SLURM_AFTER_WHEN='$$(sb_after_when.$(1))' \
	 pipelines/slurm.sh submit $(1) $(SB_OUT)/$(1) $$(if $$(findstring n,$$(firstword -$$(MAKEFLAGS))),--dry-run)
else ifeq ($(SCHEDULER),local)
	+@$$(call sb_lock,$(1)); \
	 echo "$(1): $$($(1).NCELLS) cells in $(SB_OUT)/$(1) ($$(foreach b,$$($(1).BLOCKS),$$(b) $$($(1).$$(b).NCELLS)))" >&2; \
	 rc=0; $$(MAKE) --no-print-directory -k $$(if $$(filter -j%,$$(MAKEFLAGS)),,-j$$(SB_JOBS)) SB_MAKE_RUN=$$(SB_MAKE_RUN) $(1)-final-run || rc=$$$$?; \
	 $$(if $$(sb_after.$(1)),[ $$$$rc -ne 0 ] || $$(MAKE) --no-print-directory $$(sb_after.$(1)) || rc=$$$$?;) \
	 $$(if $$(findstring n,$$(firstword -$$(MAKEFLAGS))),:,$(SB_STAGE) failed $(SB_OUT)/$(1)) || exit 1; \
	 exit $$$$rc
else
	@echo "$(1): unknown SCHEDULER '$(SCHEDULER)' (local or slurm)" >&2; exit 2
endif
endef

# one make at a time per output tree: the lock (fd 8) is held by the recipe and
# everything it starts, so a second make, or one started while an orphaned trainer
# of a killed make still runs, refuses instead of racing it
sb_lock = exec 8>>"$(SB_OUT)/$(1)/.grid/run.lock"; flock -n 8 || { echo "$(1): another make is working on $(SB_OUT)/$(1) (or a program it started still runs); wait for it" >&2; exit 1; }

# sb_after.GRID: a goal made (in a new make, which re-reads the grids) after GRID's
# own targets succeed, e.g. make extension then runs the switching grid whose switch
# epochs the extension grid has just written (pipelines/extension.mk).
# Under Slurm the same continuation is a new submission: sb_after_slurm.GRID is the goal
# the final job submits (make SCHEDULER=slurm GOAL) once every file of
# sb_after_when.GRID exists (pipelines/slurm.sh).

# ---- loading grids: a grid's cells.mk is read only when a goal needs it ----
# (SB_LOAD_ALL=1 loads every grid, for targets given by path.)
# (sb_also.GRID: other goals that run GRID, e.g. make extension runs switching.)
sb_also.switching := $(if $(wildcard pipelines/grids/switching-epochs.inc),extension extension-%)
sb_goal_needs = $(filter $(1) $(1)-% $(SB_OUT)/$(1)/% $(sb_also.$(1)) $(if $(SB_LOAD_ALL),%),$(MAKECMDGOALS))
define sb_param_rule
$(1):
	@SB_GRID_CHECK=$(SB_BIN)/sb-train $(SB_GRID) expand $(3) $(SB_OUT)/$(2) && [ -f $$@ ] || { echo "$$@: not declared by $(3)" >&2; exit 2; }
endef
define sb_grid_load
SB_GRIDFILE.$(1) := $(2)
ifneq ($$(call sb_goal_needs,$(1)),)
$(SB_OUT)/$(1)/.grid/cells.mk: $(2) $(SB_GRID)
	@SB_GRID_CHECK=$(SB_BIN)/sb-train $(SB_GRID) expand $(2) $(SB_OUT)/$(1)
# parameter files are written by the expansion; a missing one re-runs it
$$(foreach p,%/cell.json %/params/freeze %/params/test %/params/stats %/params/a8 %/params/criteria %/params/cells,$$(eval $$(call sb_param_rule,$(SB_OUT)/$(1)/$$(p),$(1),$(2))))
-include $(SB_OUT)/$(1)/.grid/cells.mk
$$(eval $$(call sb_grid_targets,$(1)))
endif
endef
$(foreach g,$(SB_GRIDS),$(eval $(call sb_grid_load,$(basename $(notdir $(g))),$(g))))

# ---- outputs: MANIFEST.csv of an output tree (PROTOCOL A5 columns) ----
# make out-manifest [OUTTREE=out/study]   write OUTTREE/MANIFEST.csv
# make out-verify   [OUTTREE=out/study]   check it and every sidecar in the tree
OUTTREE ?= $(SB_OUT)
.PHONY: out-manifest out-verify
out-manifest:
	@$(SB_STAGE) manifest $(OUTTREE)
out-verify:
	@$(SB_STAGE) verify $(OUTTREE)

endif
