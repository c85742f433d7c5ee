# pipelines/extension.mk — make extension: PROTOCOL A8's extension grids.
#
# pipelines/grids/extension.grid (the trajectory grid, the bottom-k control, the
# linear-decay control, with their predeclared criteria) runs like any grid
# (pipelines/common.mk). The switching schedules, pipelines/grids/switching.grid, run
# with it once pipelines/grids/switching-epochs.inc holds their switch epochs, which
# are predicted from the trajectory grid (docs/pipelines.md, "The extension grids").
# pipelines/grids/confirmation.grid (M3) runs after them: make confirmation.
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

# ---- the computed verdicts: a block with "stage a8 analysis=..." (any grid) ----
# BLOCKDIR/a8/{a8.ndjson,a8.md}: sb-a8 on the block's validation logs (docs/sb-a8.md),
# shown in the grid's report beside the block's predeclared criteria; the trajectory
# block's m1 also writes the switch epochs (switch_epochs=FILE, beside the grid file).
# Stage options that reach beyond the block (the confirmation grid, M3):
#   a8: trajectory=GRID/BLOCK m2=GRID/BLOCK   sb-a8 m3map's inputs, $(SB_OUT)/GRID/BLOCK/a8/a8.ndjson
#       (made by another grid: GRID's make checks they exist before it starts)
#   a8, freeze: with_blocks=B1,B2             the validation logs of these blocks of the grid too
#   freeze: switch_map=FILE                   (beside the grid file) an input of the selection
#   a8 of a block with a test stage           the test read is an input too (sb-a8 m3)
sb_comma := ,
sb_opt = $(patsubst $(4)=%,%,$(filter $(4)=%,$($(1).$(2).$(3).OPTS)))
sb_with_val = $(foreach w,$(subst $(sb_comma), ,$(call sb_opt,$(1),$(2),$(3),with_blocks)),$($(1).$(w).VAL) $(SB_OUT)/$(1)/$(w)/params/cells)
sb_a8_ext = $(foreach x,$(call sb_opt,$(1),$(2),a8,trajectory) $(call sb_opt,$(1),$(2),a8,m2),$(SB_OUT)/$(x)/a8/a8.ndjson)
define sb_a8_block
$(SB_OUT)/$(1)/$(2)/a8/a8.ndjson: $$($(1).$(2).VAL) $(SB_OUT)/$(1)/$(2)/params/a8 $(SB_OUT)/$(1)/$(2)/params/cells $(call sb_with_val,$(1),$(2),a8) $(call sb_a8_ext,$(1),$(2)) $(if $(filter test,$($(1).$(2).STAGES)),$(SB_OUT)/$(1)/$(2)/test/test.ndjson) | $(call sb_prog,a8)
	@$(SB_STAGE) a8 $(SB_OUT)/$(1)/$(2)
$(SB_OUT)/$(1)/report.md: $(SB_OUT)/$(1)/$(2)/a8/a8.ndjson
$(if $(call sb_a8_ext,$(1),$(2)),$(1): $(1)-a8-inputs)
$(1)-a8-inputs::
	@for f in $(call sb_a8_ext,$(1),$(2)); do [ -f "$$$$f" ] && [ -f "$$$$f.sha256" ] || { echo "$(1): $$$$f is missing: block $(2)'s analysis needs it, and it is made by another grid's sb-a8 stage (for the confirmation grid: make extension, which runs the trajectory and switching grids, first; docs/pipelines.md)" >&2; exit 2; }; done
endef
# an input of another grid that this make does not load: a rule that says where it comes from
# (make -n lists it; a real make stops before any cell, GRID-a8-inputs above)
define sb_a8_ext_rule
$(1):
	@echo "$(1) is missing: it is made by another grid's sb-a8 stage (for the confirmation grid: make extension first; docs/pipelines.md)" >&2; exit 2
endef
sb_a8_ext_rules = $(foreach x,$(call sb_a8_ext,$(1),$(2)),$(if $(or $(sb_ext_done.$(x)),$($(firstword $(subst /, ,$(patsubst $(SB_OUT)/%,%,$(x)))).BLOCKS)),,$(eval sb_ext_done.$(x) := 1)$(eval $(call sb_a8_ext_rule,$(x)))))
define sb_freeze_with
$(SB_OUT)/$(1)/$(2)/selection.json: $(call sb_with_val,$(1),$(2),freeze) $(addprefix $(dir $(SB_GRIDFILE.$(1))),$(call sb_opt,$(1),$(2),freeze,switch_map))
endef
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(foreach b,$($(g).BLOCKS),$(if $(filter a8,$($(g).$(b).STAGES)),$(eval $(call sb_a8_block,$(g),$(b))))))
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(foreach b,$($(g).BLOCKS),$(if $(filter a8,$($(g).$(b).STAGES)),$(call sb_a8_ext_rules,$(g),$(b)))))
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(foreach b,$($(g).BLOCKS),$(if $(filter freeze,$($(g).$(b).STAGES)),$(eval $(call sb_freeze_with,$(g),$(b))))))

# ---- blocks that await a file another block makes (scripts/grid "await"): the confirmation ----
# The first make runs the blocks that do not wait (for the confirmation grid: confirm_base and
# its sb-a8 m3map, which writes the switch map); then, when the awaited files exist, a new
# make (which expands the grid again, now with the waiting blocks) makes the rest: GRID-final-run
# under the lock the first one holds (sb_after, common.mk).
define sb_await_hook
.PHONY: $(1)-after-await
$(1)-after-await:
	@if [ -n "$$(findstring n,$$(firstword -$$(MAKEFLAGS)))" ]; then \
	   echo "$(1): (dry run) then, once the awaited files exist, a new make runs the blocks that wait for them ($(strip $($(1).WAITING)))" >&2; exit 0; \
	 fi; \
	 if [ -n "$(strip $($(1).WAITING))" ]; then \
	   echo "$(1): blocks $(strip $($(1).WAITING)) wait for $(foreach b,$($(1).WAITING),$($(1).$(b).AWAITS)), which an earlier block's stage writes; it did not (see that block's a8 record), so they were not run (docs/pipelines.md)" >&2; exit 1; \
	 fi; \
	 echo "$(1): the awaited files exist; now the blocks that waited for them" >&2; \
	 $$(MAKE) --no-print-directory -k $$(if $$(filter -j%,$$(MAKEFLAGS)),,-j$(SB_JOBS)) $(1)-final-run
endef
# (the hook is defined for every loaded grid: the new make, which expands the grid again,
# no longer sees the blocks as waiting)
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(if $(strip $($(g).WAITING)),$(eval sb_after.$(g) := $(g)-after-await)))
# under Slurm: the final job resubmits the grid once the awaited files exist
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(if $(strip $($(g).WAITING)),$(eval sb_after_slurm.$(g) := $(g))$(eval sb_after_when.$(g) := $(foreach b,$($(g).WAITING),$($(g).$(b).AWAITS)))))
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(if $(strip $($(g).BLOCKS) $($(g).WAITING)),$(eval $(call sb_await_hook,$(g)))))

ifneq ($(wildcard pipelines/grids/switching-epochs.inc),)
extension: switching
else
# The switch epochs are written by the trajectory block's sb-a8 m1, i.e. by this run; the
# switching grid is loaded only when the file exists, so once the extension grid is
# done, a new make (which loads it) runs the switching schedules (sb_after, common.mk).
sb_after.extension := extension-then-switching
sb_after_slurm.extension := switching
sb_after_when.extension := pipelines/grids/switching-epochs.inc
.PHONY: extension-then-switching
extension-then-switching:
	@if [ -f pipelines/grids/switching-epochs.inc ]; then \
	   echo "extension: the trajectory analysis wrote pipelines/grids/switching-epochs.inc; now the switching schedules (pipelines/grids/switching.grid)" >&2; \
	   $(MAKE) --no-print-directory switching; \
	 else \
	   echo "extension: the switching schedules (pipelines/grids/switching.grid, 2,400 runs) need pipelines/grids/switching-epochs.inc, which the trajectory block's analysis (sb-a8 m1) writes; it did not (see its a8 record), so they were not run (docs/pipelines.md)" >&2; \
	 fi
endif
