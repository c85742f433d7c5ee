# pipelines/lm.mk — make lm: the hook for the LM track (PROTOCOL B and C).
#
# The LM track's pipeline goes in its own fragment, pipelines/lm-track.mk (any
# pipelines/lm-*.mk), which defines the target lm; a grid of its cells can be
# pipelines/grids/lm.grid, run by pipelines/common.mk like any grid (make lm-cells,
# lm-list, SCHEDULER=slurm ...) with stages of its own. Until then, make lm says so.
ifeq ($(wildcard pipelines/lm-*.mk pipelines/grids/lm.grid),)
.PHONY: lm
lm:
	@echo "lm: the LM track is not part of this build yet; its pipeline hooks in as pipelines/lm-track.mk or pipelines/grids/lm.grid (docs/pipelines.md, 'The LM track')" >&2
	@exit 2
endif
