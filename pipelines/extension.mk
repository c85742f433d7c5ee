# pipelines/extension.mk — make extension: PROTOCOL A8's extension grids.
#
# pipelines/grids/extension.grid (the trajectory grid, the bottom-k control, the
# linear-decay control, with their predeclared criteria) runs like any grid
# (pipelines/common.mk). The switching schedules, pipelines/grids/switching.grid, run
# with it once pipelines/grids/switching-epochs.inc holds their switch epochs, which
# are predicted from the trajectory grid (docs/pipelines.md, "The extension grids").
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

ifneq ($(wildcard pipelines/grids/switching-epochs.inc),)
extension: switching
else
.PHONY: extension-switching-note
extension: extension-switching-note
extension-switching-note:
	@echo "extension: the switching schedules (pipelines/grids/switching.grid, 2,400 runs) need pipelines/grids/switching-epochs.inc, the switch epochs predicted from this trajectory grid; not there yet, so they are not run (docs/pipelines.md)" >&2
endif
