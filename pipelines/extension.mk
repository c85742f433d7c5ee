# pipelines/extension.mk — make extension: PROTOCOL A8's extension grids.
#
# pipelines/grids/extension.grid (the trajectory grid, the bottom-k control, the
# linear-decay control, with their predeclared criteria) runs like any grid
# (pipelines/common.mk). The switching schedules, pipelines/grids/switching.grid, run
# with it once pipelines/grids/switching-epochs.inc holds their switch epochs, which
# are predicted from the trajectory grid (docs/pipelines.md, "The extension grids").
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

# ---- the computed verdicts: a block with "stage a8 analysis=..." (any grid) ----
# BLOCKDIR/a8/{a8.ndjson,a8.md}: sb-a8 on the block's validation logs (docs/sb-a8.md),
# shown in the grid's report beside the block's predeclared criteria; the trajectory
# block's m1 also writes the switch epochs (switch_epochs=FILE, beside the grid file).
define sb_a8_block
$(SB_OUT)/$(1)/$(2)/a8/a8.ndjson: $$($(1).$(2).VAL) $(SB_OUT)/$(1)/$(2)/params/a8 | $(call sb_prog,a8)
	@$(SB_STAGE) a8 $(SB_OUT)/$(1)/$(2)
$(SB_OUT)/$(1)/report.md: $(SB_OUT)/$(1)/$(2)/a8/a8.ndjson
endef
$(foreach g,$(basename $(notdir $(SB_GRIDS))),$(foreach b,$($(g).BLOCKS),$(if $(filter a8,$($(g).$(b).STAGES)),$(eval $(call sb_a8_block,$(g),$(b))))))

ifneq ($(wildcard pipelines/grids/switching-epochs.inc),)
extension: switching
else
# The switch epochs are written by the trajectory block's sb-a8 m1, i.e. by this run; the
# switching grid is loaded only when the file exists, so once the extension grid is
# done, a new make (which loads it) runs the switching schedules (sb_after, common.mk).
sb_after.extension := extension-then-switching
.PHONY: extension-then-switching
extension-then-switching:
	@if [ -f pipelines/grids/switching-epochs.inc ]; then \
	   echo "extension: the trajectory analysis wrote pipelines/grids/switching-epochs.inc; now the switching schedules (pipelines/grids/switching.grid)" >&2; \
	   $(MAKE) --no-print-directory switching; \
	 else \
	   echo "extension: the switching schedules (pipelines/grids/switching.grid, 2,400 runs) need pipelines/grids/switching-epochs.inc, which the trajectory block's analysis (sb-a8 m1) writes; it did not (see its a8 record), so they were not run (docs/pipelines.md)" >&2; \
	 fi
endif
