#!/usr/bin/env bash
# tests/gpu/bundle.sh — prebuild the GPU check here and pack it for a device
# machine that may lack the -dev packages (yajl, OpenSSL, OpenBLAS): the programs,
# built for x86-64-v3 (AVX2; any H200 host runs it) with CUDA for sm_80/sm_90, and
# the shared libraries they need beyond libc/libstdc++ and CUDA's own.
#
#   tests/gpu/bundle.sh [OUT.tar.xz]     (default .gpubundle.tar.xz, ignored by git)
# On the device: SB_GPU_PREBUILT=.gpubundle.tar.xz tests/gpu/run.sh OUTDIR
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/.gpubundle.tar.xz}
work=$(mktemp -d /tmp/sb-gpubundle.XXXXXX)
trap 'rm -rf "$work"' EXIT
git -C "$top" worktree add -q --detach "$work/src" HEAD
# carry uncommitted changes of tracked files too, so the bundle matches the tree
git -C "$top" diff HEAD | (cd "$work/src" && git apply --allow-empty 2>/dev/null || true)
# the portable normaliser kernels throughout (no AVX2 general-alpha kernels): the CUDA
# kernels repeat their operations, so the op checks can compare them bit for bit
make -C "$work/src" CUDA=1 OPT="-O2 -march=x86-64-v3 -DSB_NORM_PORTABLE" -j"$(nproc)" all >&2
mkdir -p "$work/b/bin" "$work/b/gpu" "$work/b/lib" "$work/b/tests"
cp "$work/src"/bin/sb-* "$work/b/bin/"
cp "$work/src"/build/gpu/* "$work/b/gpu/"
cp "$work/src"/build/tests/test_cuda_host "$work/b/tests/"
for f in "$work"/b/bin/* "$work"/b/gpu/* "$work"/b/tests/*; do
	ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libnsl|libutil|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' |
	while read -r so; do cp -L "$so" "$work/b/lib/"; done
strip --strip-debug "$work"/b/bin/* "$work"/b/gpu/* "$work"/b/tests/* 2>/dev/null || true
(cd "$work/src" && git describe --always --dirty) >"$work/b/VERSION"
tar -C "$work/b" -cJf "$out" .
git -C "$top" worktree remove --force "$work/src"
echo "bundle: $out ($(du -h "$out" | cut -f1)); libraries: $(ls "$work/b/lib" | tr '\n' ' ')" >&2
