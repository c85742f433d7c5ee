# pipelines/demo.mk — make demo: the embedded default pipeline (README's main command).
#
# The grid is pipelines/grids/demo.grid (Fashion-MNIST from Debian's
# dataset-fashion-mnist package, the synthetic marker task, all seven methods, 3
# seeds); pipelines/common.mk runs it like any grid: fetch, train, eval, freeze,
# test read, statistics, and out/demo/report.md with its tables and SVG figures.
# First, demo-setup installs the Debian packages it needs (scripts/deps.sh).
# Progress goes to stderr; running it again is a no-op.
include $(dir $(lastword $(MAKEFILE_LIST)))common.mk

.PHONY: demo-setup
demo: demo-setup
demo-setup:
	@scripts/deps.sh
# the packages before the programs, which need them to build on a fresh machine (demo's
# prerequisites are the grid's, cells.mk and sb-programs, then demo-setup; and with -j
# make would start them at once)
ifneq ($(filter demo,$(MAKECMDGOALS)),)
sb-programs: demo-setup
endif
