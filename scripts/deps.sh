#!/usr/bin/env bash
# scripts/deps.sh — make sure the Debian packages sparsebench needs are installed.
#
# Called by `make check` and `make demo`, so that on a fresh Debian machine the
# README's two commands are all the set-up there is. As root it installs what is
# missing with apt-get; otherwise it prints the exact command and exits 1.
# Without dpkg-query or apt-get it says so and exits 1.
#
#   scripts/deps.sh            build + test + demo packages
#   scripts/deps.sh --print    only print what is missing
#
# The list, and why each package is here:
#   build-essential pkg-config      C11 compiler, make, pkg-config
#   libyajl-dev                     JSON parsing behind lib/json.h
#   libarchive-dev                  dataset archive extraction (tar, zip, gz, bz2)
#   libssl-dev                      SHA-256 through OpenSSL libcrypto
#   libopenblas-dev                 CPU matrix products
#   libcurl4-openssl-dev            sb-fetch downloads
#   strace                          the guard test proves with it that a refused test read opens no test file
#   zlib1g-dev                      MATLAB v5 miCOMPRESSED elements (SVHN); already a libarchive dependency
#   dataset-fashion-mnist           the real data of `make demo` and of the sb-fetch tests (mirror)
#   jargon-text                     an LM corpus (the Jargon File)
#   python3 python3-numpy python3-scipy   fixture builders used by some tests (CI needs no torch)
#   bzip2 zip unzip xz-utils curl   tools the fixture builders and the HTTP tests use
set -eu
print_only=0
[ "${1:-}" = "--print" ] && print_only=1

pkgs=(build-essential pkg-config libyajl-dev libarchive-dev libssl-dev libopenblas-dev libcurl4-openssl-dev
      zlib1g-dev strace dataset-fashion-mnist jargon-text python3 python3-numpy python3-scipy bzip2 zip unzip xz-utils curl)
if [ -n "${SB_EXTRA_PKGS:-}" ]; then
	# shellcheck disable=SC2206
	pkgs+=($SB_EXTRA_PKGS)
fi

# without dpkg (not a Debian-based system) nothing can be checked: say so, rather than
# calling every package missing and then failing on a missing apt-get
if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "scripts/deps.sh: dpkg-query not found (not a Debian-based system?): cannot check or install the packages sparsebench needs." >&2
	echo "install these Debian packages, or your system's equivalents, by hand: ${pkgs[*]}" >&2
	exit 1
fi
missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ $print_only -eq 1 ]; then
	echo "missing: ${missing[*]}"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "sparsebench needs these Debian packages: ${missing[*]}" >&2
	echo "install them as root with:" >&2
	echo "  $cmd" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "scripts/deps.sh: apt-get not found: cannot install the missing Debian packages: ${missing[*]}" >&2
	exit 1
fi
echo "scripts/deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
