# sparsebench — top-level build.
#
#   make            CPU build of every program into bin/, lib/libsparsebench.a
#   make CUDA=1     also the CUDA backend (default: on when nvcc is found)
#   make SAN=1      ASan + UBSan build (CUDA off) into build/san/, programs in build/san/bin/
#   make V3=1       an x86-64-v3 (AVX2) build (CUDA off) into build/v3/, programs in build/v3/bin/
#   make EMU=1      the CUDA backend on the host emulator (tests/cudaemu/) into build/emu/,
#                   programs in build/emu/bin/, the GPU checks in build/emu/gpu/ (no GPU needed)
#   make check      build and run every test; ends with "N passed, N failed"
#   make demo       the embedded default pipeline on real data (pipelines/demo.mk)
#   make manifest   regenerate MANIFEST.csv;   make verify: check it
#
# Layout rules (glob based, so a new file needs no Makefile edit):
#   lib/*.c                 -> lib/libsparsebench.a
#   lib/cuda/*.cu           -> lib/libsparsebench_cuda.a (CUDA=1 only)
#   <stage>/sb-NAME.c       -> bin/sb-NAME, linked with <stage>/*.o that are not sb-*.o
#   tests/unit/test_*.c     -> build/tests/test_*  (run by tests/run.sh)

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
# A recipe line that writes $@.tmp and renames it into place begins with $(ATOMIC): its shell
# removes $@.tmp when it exits, so a recipe that fails, is interrupted (SIGINT) or is killed
# (SIGTERM, SIGHUP) leaves no temporary file behind; after the rename there is nothing to
# remove. Each recipe line is its own shell: the write and the rename share one line. The
# signals are trapped explicitly, as in pipelines/stage.sh (which says why).
# $(call atomic,FILES) does the same for other temporary files.
atomic = trap 'trap "" HUP INT TERM; rm -f $(1)' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM;
ATOMIC = $(call atomic,$@.tmp)
MAKEFLAGS += --no-builtin-rules --no-builtin-variables

ifneq ($(filter default undefined,$(origin CC)),)
  CC := cc
endif
ifneq ($(filter default undefined,$(origin CXX)),)
  CXX := g++
endif
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
ifeq ($(origin CUDA),undefined)
  CUDA := $(if $(NVCC),1,0)
endif

# SAN=1: AddressSanitizer + UndefinedBehaviorSanitizer, everything under build/san/ so it
# never mixes with the normal objects; a UBSan report aborts (no recovery) so it cannot pass.
SAN ?= 0
ifeq ($(SAN),1)
  override CUDA := 0
  B       := build/san
  BIN     := build/san/bin
  OPT     ?= -O1 -march=native
  SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else ifeq ($(V3),1)
  # V3=1: a second CPU build for x86-64-v3 (AVX2 + FMA, no AVX-512), as tests/gpu/bundle.sh
  # builds for GPU hosts and as AVX2-only machines run: build/v3/ (tests/sh/isa_v3.sh)
  override CUDA := 0
  B       := build/v3
  BIN     := build/v3/bin
  OPT     := -O2 -march=x86-64-v3
  SAN_FLAGS :=
else ifeq ($(EMU),1)
  # EMU=1: lib/cuda compiled for the host and linked with tests/cudaemu's runtime, so the
  # CUDA backend's kernels and host code run here (tests/sh/cuda_emu.sh)
  override CUDA := 1
  override NVCC := tests/cudaemu/nvcc-emu
  # the portable normaliser kernels, whose operations the CUDA rows repeat (as
  # tests/gpu/bundle.sh builds for the GPU check): gpu_ops compares P and aux at TOL_EX
  OPT     ?= -O2 -march=native -DSB_NORM_PORTABLE
  B       := build/emu
  BIN     := build/emu/bin
  SAN_FLAGS :=
else
  B       := build
  BIN     := bin
  SAN_FLAGS :=
endif

PKGS     := yajl libarchive libcrypto openblas libcurl zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WERROR  ?= -Werror
OPT     ?= -O2 -march=native
CFLAGS  ?= $(OPT) -g
override CFLAGS += $(SAN_FLAGS)
SB_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra $(WERROR) \
             -Wno-unused-parameter -Wno-format-truncation -Wno-psabi -fno-fast-math -pthread -MMD -MP -Ilib $(PKG_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lm -lpthread

ifeq ($(CUDA),1)
  SB_CFLAGS += -DSB_HAVE_CUDA=1
  NVCCFLAGS ?= -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=sm_80 \
               -gencode=arch=compute_90,code=compute_90 -Xcompiler -Wall,-fno-fast-math -Ilib -MMD -MP
  # -fmad=false: no FMA contraction, so the row kernels give the CPU backend's bits
  # (lib/cuda/lanes.cuh); fmaf is used exactly where the CPU fuses.
  # -ftz=true: the CPU backend runs its ops with flush-to-zero and denormals-are-zero
  # (MXCSR FTZ|DAZ, lib/backend_cpu.c); float values below FLT_MIN read and write as 0 here too.
  NVCCFLAGS += -fmad=false -ftz=true
  # -u: the backend is reached only through a weak reference (lib/backend.h), which
  # would not pull its object out of the archive.
  CUDA_LIBS := -Wl,-u,sb_backend_cuda_open -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
  CUDA_LIBA := lib/libsparsebench_cuda.a
  ifeq ($(EMU),1)
    # nvcc-emu passes these to g++ (-ffp-contract=off is its own, for -fmad=false; the
    # emulator's fibers run with FTZ|DAZ, for -ftz=true)
    NVCCFLAGS := -O2 -g -Wall -Wno-unused-function -Ilib $(PKG_CFLAGS) -MMD -MP
    CUDA_LIBS := -Wl,-u,sb_backend_cuda_open -lstdc++
    CUDA_LIBA := $(B)/libsparsebench_cuda.a
  endif
  FEATURES := cpu cuda
else
  FEATURES := cpu
endif

VERSION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)

LIB_SRC  := $(sort $(wildcard lib/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
CU_SRC   := $(sort $(wildcard lib/cuda/*.cu))
CU_OBJ   := $(CU_SRC:%.cu=$(B)/%.o)
STAGES   := fetch train evalsel freeze testread aggregate
PROG_SRC := $(sort $(foreach s,$(STAGES),$(wildcard $(s)/sb-*.c)))
PROGS    := $(foreach p,$(PROG_SRC),$(BIN)/$(basename $(notdir $(p))))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TESTS    := $(TEST_SRC:tests/unit/%.c=$(B)/tests/%)

LIBA     := $(if $(filter 1,$(SAN) $(V3) $(EMU)),$(B)/libsparsebench.a,lib/libsparsebench.a)
LIBS_ALL := $(LIBA) $(if $(filter 1,$(CUDA)),$(CUDA_LIBA))

.PHONY: all check clean demo manifest verify deps features help
# GPU check and benchmark programs (tests/gpu/*.c, bench/gpu/*.c -> build/gpu/NAME):
# backend-generic C, linked with train/multicell.o; built by every build (CUDA=0 too).
GPU_SRC   := $(sort $(wildcard tests/gpu/*.c bench/gpu/*.c))
GPU_PROGS := $(addprefix $(B)/gpu/,$(basename $(notdir $(GPU_SRC))))

all: $(PROGS) $(TESTS) $(if $(filter 1,$(SAN)),,$(GPU_PROGS)) features

features: $(PROGS)
	@echo "sparsebench $(VERSION): built [$(FEATURES)] -> $(PROGS)" >&2

# version.h is rewritten only when the version string changes
lib/version.h: FORCE
	@$(ATOMIC) v='#define SB_VERSION "$(VERSION)"'; \
	 if [ ! -f $@ ] || [ "$$(cat $@)" != "$$v" ]; then echo "$$v" > $@.tmp && mv $@.tmp $@; fi
.PHONY: FORCE
FORCE:

$(B)/%.o: %.c | lib/version.h
	@mkdir -p $(dir $@)
	$(CC) $(SB_CFLAGS) $(CFLAGS) -c $< -o $@

$(B)/lib/cuda/%.o: lib/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# (EMU=1: with the emulator's runtime, which the backend's objects pull in)
$(CUDA_LIBA): $(CU_OBJ) $(if $(filter 1,$(EMU)),$(B)/cudaemu.o)
	@rm -f $@
	ar rcs $@ $^

EMU_HDR := tests/cudaemu/include/cuda_runtime.h tests/cudaemu/include/cublas_v2.h tests/cudaemu/nvcc-emu
$(B)/cudaemu.o: tests/cudaemu/cudaemu.cc $(EMU_HDR)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -U_FORTIFY_SOURCE -Itests/cudaemu/include $(PKG_CFLAGS) -c $< -o $@

ifeq ($(EMU),1)
# the emulator's own checks (tests/cudaemu/selftest.cu)
all: $(B)/cudaemu/selftest
$(CU_OBJ) $(B)/cudaemu/selftest.o: $(EMU_HDR)
$(B)/cudaemu/selftest.o: tests/cudaemu/selftest.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(B)/cudaemu/selftest: $(B)/cudaemu/selftest.o $(B)/cudaemu.o
	$(CXX) -pthread -o $@ $^ $(LDLIBS)
endif

# bin/sb-NAME: the stage's main file plus the stage's other (non sb-*) objects. The stages
# of HOST_STAGES never open a compute backend, so their programs are linked without the
# CUDA backend and cuBLAS (they start in 0.01 s and 10 MB instead of 0.1 s and 220 MB, and
# run where the CUDA libraries are not installed).
HOST_STAGES := fetch freeze aggregate
host_stage = $(filter $(HOST_STAGES),$(patsubst %/,%,$(dir $(1))))
define prog_rule
$(BIN)/$(basename $(notdir $(1))): $(B)/$(1:.c=.o) $(patsubst %.c,$(B)/%.o,$(filter-out $(dir $(1))sb-%.c,$(wildcard $(dir $(1))*.c))) $(if $(call host_stage,$(1)),$(LIBA),$(LIBS_ALL))
	@mkdir -p $(BIN)
	$$(CC) $$(CFLAGS) -pthread -o $$@ $$(filter %.o,$$^) $(if $(call host_stage,$(1)),$(LIBA),$(LIBS_ALL) $$(CUDA_LIBS)) $$(LDLIBS)
endef
$(foreach p,$(PROG_SRC),$(eval $(call prog_rule,$(p))))

# sb-fetch embeds its registry (fetch/registry_blob.c: .incbin), which -MMD cannot see
$(B)/fetch/registry_blob.o: fetch/registry.json

$(B)/tests/%: $(B)/tests/unit/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $< $(LIBS_ALL) $(CUDA_LIBS) $(LDLIBS)

$(B)/gpu/%: $(B)/tests/gpu/%.o $(B)/train/multicell.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $(filter %.o,$^) $(LIBS_ALL) $(CUDA_LIBS) $(LDLIBS)

$(B)/gpu/%: $(B)/bench/gpu/%.o $(B)/train/multicell.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $(filter %.o,$^) $(LIBS_ALL) $(CUDA_LIBS) $(LDLIBS)

deps:
	@scripts/deps.sh

# make check's build (and a pipeline's programs, pipelines/common.mk) take one job per core
# unless make was given -j: a serial build of everything, the CUDA backend included, takes
# twice as long on two cores (134 s against 66 s)
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$$(nproc 2>/dev/null || echo 1))
check: deps
	@$(MAKE) --no-print-directory $(BUILD_JOBS) all
	@tests/run.sh

# make help: the targets, the variables, and the grids with their cells
help:
	@printf '%s\n' \
	 'sparsebench: make targets (README.md; docs/pipelines.md for the pipelines)' \
	 '  make                    the programs into bin/ (and the CUDA backend when nvcc is found)' \
	 '  make check              build and run every test        make deps   the Debian packages' \
	 '  make demo               the embedded demo on real Fashion-MNIST -> out/demo/report.md' \
	 '  make GRID               a grid: cells, freeze, test read, statistics -> out/GRID/report.md' \
	 '  make GRID-cells         only its cells (train + eval)   GRID-list   print its cells' \
	 '  make GRID-failed        its failed and unfinished cells GRID-data   fetch its datasets' \
	 '  make GRID-adopt FROM=DIR   take the same cells, finished, from another grid'"'"'s tree' \
	 '  make SCHEDULER=slurm GRID  the same cells as Slurm jobs' \
	 '  make lm | sas | sas-scaled | n3a n3a-verdict | n3a-interim   the LM track, SAS, N3-A' \
	 '  make out-manifest OUTTREE=DIR | out-verify OUTTREE=DIR   an output tree'"'"'s manifest, its check' \
	 'Variables: SB_OUT (out) SB_DATA (data) SB_BIN (bin) SB_MIRRORS TRAIN_THREADS RESUME' \
	 '  ACCEPT_FAILED REFREEZE RETEST DEVICE (cuda[:N][,tf32]) EXTRA_GRIDS=path/NAME.grid' \
	 'Grids (pipelines/grids/):'
	@for g in $(SB_GRIDS); do $(SB_GRID) about "$$g"; done

manifest:
	@scripts/manifest.sh write

verify:
	@scripts/manifest.sh check

clean:
	rm -rf build bin $(LIBA) lib/libsparsebench_cuda.a lib/version.h

-include $(wildcard pipelines/*.mk)
-include $(shell find build -name '*.d' 2>/dev/null)
