# What scripts/gpu-check and scripts/gpu-bench share (sourced; not a
# program itself): their options, the build dependencies (checked, and
# unpacked from carried .deb files when missing), configure and build, and
# steps that log to --out DIR and end in one table.
#
# A step: `step NAME SECONDS COMMAND...` runs COMMAND with its output in
# OUT/NAME.log, at most SECONDS (0: no limit of its own) and never past the
# whole run's --budget (so that the table comes inside a command of a
# fixed length; a step with no time left is no-time). It records ok,
# FAIL, TIMEOUT, skipped (exit status 77) or slow (3: a benchmark under its
# target), the wall time, and a note: what COMMAND passed to `note`, else
# for a step that did not succeed the last line of its log.
set -euo pipefail
set -a                             # steps with a time limit run in a child bash
unset MAKEFLAGS MFLAGS MAKELEVEL   # when run under make or ctest

GPU_SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROG=${PROG:?}

die() { echo "$PROG: error: $*" >&2; exit 1; }
usage_error() { echo "$PROG: error: $*" >&2; echo "Try '$PROG --help'." >&2; exit 2; }

# The options both take (each script adds its own before calling parse_common).
DEVICE=cuda SMALL=0 OUT= BUILD= JOBS=$(nproc) DEPS= ARCHS="90a;80" FETCH_DEPS= BUDGET=570 PACK=
STARTED=$EPOCHSECONDS
# parse_common ARG...: sets the variables above; other options are the
# script's own: it gets them back in EXTRA (an array).
EXTRA=()
parse_common() {
  while [ $# -gt 0 ]; do
    case $1 in
      --device) [ $# -ge 2 ] || usage_error "--device needs a value"; DEVICE=$2; shift 2 ;;
      --small) SMALL=1; shift ;;
      --out) [ $# -ge 2 ] || usage_error "--out needs a value"; OUT=$2; shift 2 ;;
      --build) [ $# -ge 2 ] || usage_error "--build needs a value"; BUILD=$2; shift 2 ;;
      --jobs) [ $# -ge 2 ] || usage_error "--jobs needs a value"; JOBS=$2; shift 2 ;;
      --deps) [ $# -ge 2 ] || usage_error "--deps needs a value"; DEPS=$2; shift 2 ;;
      --archs) [ $# -ge 2 ] || usage_error "--archs needs a value"; ARCHS=$2; shift 2 ;;
      --fetch-deps) [ $# -ge 2 ] || usage_error "--fetch-deps needs a value"; FETCH_DEPS=$2; shift 2 ;;
      --budget) [ $# -ge 2 ] || usage_error "--budget needs a value"; BUDGET=$2; shift 2 ;;
      --pack) [ $# -ge 2 ] || usage_error "--pack needs a value"; PACK=$2; shift 2 ;;
      *) EXTRA+=("$1"); shift ;;
    esac
  done
  case $DEVICE in cpu|cuda|cuda:[0-9]*) ;; *) usage_error "--device must be cpu or cuda[:N], not '$DEVICE'" ;; esac
  [[ $JOBS =~ ^[1-9][0-9]*$ ]] || usage_error "--jobs must be a positive number, not '$JOBS'"
  [[ $BUDGET =~ ^[1-9][0-9]*$ ]] || usage_error "--budget must be a positive number of seconds, not '$BUDGET'"
  if [ -n "$FETCH_DEPS" ]; then fetch_deps "$FETCH_DEPS"; exit 0; fi
  [ -n "$OUT" ] || usage_error "--out DIR is required (the logs and the table go there)"
}

# start_common: once the script's own options are checked too, the folders.
start_common() {
  [ -n "$BUILD" ] || BUILD=$GPU_SOURCE/build-gpu
  mkdir -p "$OUT" || die "cannot make $OUT"
  OUT=$(cd "$OUT" && pwd)
  # With a pack, BUILD is where it is unpacked (pack_step).
  [ -n "$PACK" ] || BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd) || die "cannot make $BUILD"
  [ -z "$DEPS" ] || DEPS=$(cd "$DEPS" 2>/dev/null && pwd) || die "--deps $DEPS: no such folder"
  [ -z "$PACK" ] || [ -f "$PACK" ] || die "--pack $PACK: no such file (scripts/gpu-pack makes it)"
  # nvcc and compute-sanitizer live there on the GPU machine, often off PATH.
  [ -d /usr/local/cuda/bin ] && PATH=$PATH:/usr/local/cuda/bin
  export PATH
  : >"$OUT/steps.tsv"
}

# --- build dependencies -------------------------------------------------------
# Debian package names (the ones of Makefile.data's PACKAGES that the build
# and the tests need, and the libraries those bring) for each thing the
# build looks for. On the GPU machine (its own image: CUDA, CMake, ninja,
# PyTorch) any of them may be missing; they travel as .deb files (--fetch-deps
# here, --deps there) and are unpacked into DEPS/root, never into /.
declare -A DEP_PACKAGES=(
  [pkg-config]="pkgconf-bin pkgconf libpkgconf3"
  [fmt]="libfmt-dev libfmt9"
  [CLI11]="libcli11-dev"
  [Catch2]="catch2"
  [zstd]="libzstd-dev libzstd1"
  [zlib]="zlib1g-dev zlib1g"
  [sentencepiece]="libsentencepiece-dev libsentencepiece0 libprotobuf-lite32"
  [OpenBLAS]="libopenblas0-openmp"
  [make]="make"                       # the pipelines (gpu-bench's multi30k step)
  [JSON::PP]="perl-modules-5.36"      # their log readers (perl-base has no JSON::PP)
)
readonly DEP_ORDER="pkg-config fmt CLI11 Catch2 zstd zlib sentencepiece OpenBLAS make JSON::PP"
# 1: the pipelines' tools are needed too (gpu-bench).
NEED_PIPELINE=0

# fetch_deps DIR: here (where apt works), every package above as a .deb in DIR.
fetch_deps() {
  local dir=$1 pkgs=() d
  for d in $DEP_ORDER; do pkgs+=(${DEP_PACKAGES[$d]}); done
  mkdir -p "$dir" || die "cannot make $dir"
  (cd "$dir" && apt-get download "${pkgs[@]}" >/dev/null 2>"$dir/.apt-errors") \
    || die "apt-get download failed: $(tail -n 1 "$dir/.apt-errors") (apt-get update first?)"
  rm -f "$dir/.apt-errors"
  echo "$PROG: $(ls "$dir"/*.deb | wc -l) packages ($(du -sh "$dir" | cut -f1)) in $dir: carry it and pass --deps $dir"
}

# missing_deps: the names of DEP_ORDER the build cannot find, one line.
# A throwaway CMake project asks for each as CMakeLists.txt does.
missing_deps() {
  local probe
  probe=$(mktemp -d)
  cat >"$probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES CXX)
set(missing "")
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  list(APPEND missing pkg-config zstd sentencepiece)
else()
  pkg_check_modules(ZSTD QUIET libzstd)
  pkg_check_modules(SENTENCEPIECE QUIET sentencepiece)
  if(NOT ZSTD_FOUND)
    list(APPEND missing zstd)
  endif()
  if(NOT SENTENCEPIECE_FOUND)
    list(APPEND missing sentencepiece)
  endif()
endif()
find_package(fmt QUIET)
find_package(CLI11 CONFIG QUIET)
find_package(Catch2 2 QUIET)
find_package(ZLIB QUIET)
foreach(p fmt CLI11 Catch2)
  if(NOT ${p}_FOUND)
    list(APPEND missing ${p})
  endif()
endforeach()
if(NOT ZLIB_FOUND)
  list(APPEND missing zlib)
endif()
list(JOIN missing " " text)
file(WRITE ${CMAKE_BINARY_DIR}/missing "${text}")
EOF
  local text=""
  if cmake -S "$probe" -B "$probe/b" >"$probe/log" 2>&1 && [ -f "$probe/b/missing" ]; then
    text=$(cat "$probe/b/missing")
  else
    text="cmake-or-c++-compiler"
  fi
  # OpenBLAS is loaded at run time (kernels/cpu/blas.cc), from its Debian
  # path or the library path.
  if [ ! -e /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 ] &&
     ! ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' &&
     ! (IFS=:; for d in ${LD_LIBRARY_PATH:-}; do [ -n "$d" ] && [ -e "$d/libopenblas.so.0" ] && exit 0; done; exit 1); then
    text="$text OpenBLAS"
  fi
  rm -rf "$probe"
  if [ "$NEED_PIPELINE" = 1 ]; then
    command -v make >/dev/null || text="$text make"
    perl -MJSON::PP -e 1 2>/dev/null || text="$text JSON::PP"
  fi
  echo $text
}

# use_deps DIR NAMES: unpacks the .deb files of NAMES found in DIR into
# DIR/root and points the compiler, CMake, pkg-config and the loader there.
use_deps() {
  local dir=$1 root=$1/root d p deb missing_debs=()
  shift
  mkdir -p "$root"
  for d in "$@"; do
    for p in ${DEP_PACKAGES[$d]:-}; do
      deb=$(ls "$dir"/${p}_*.deb 2>/dev/null | head -n 1)
      if [ -z "$deb" ]; then missing_debs+=("$p"); continue; fi
      dpkg -x "$deb" "$root" || die "dpkg -x $deb failed"
    done
  done
  [ ${#missing_debs[@]} -eq 0 ] || die "no .deb in $dir for: ${missing_debs[*]} (here: $PROG --fetch-deps $dir)"
  local lib=$root/usr/lib/x86_64-linux-gnu pc
  # The .pc files name /usr: point them at the unpacked tree.
  for pc in "$lib"/pkgconfig/*.pc "$root"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i -e "s|^prefix=/usr\$|prefix=$root/usr|" -e 's|^libdir=${exec_prefix}/lib$|libdir=${exec_prefix}/lib/x86_64-linux-gnu|' "$pc"
  done
  [ -e "$root/usr/bin/pkgconf" ] && [ ! -e "$root/usr/bin/pkg-config" ] && ln -s pkgconf "$root/usr/bin/pkg-config"
  export PATH="$root/usr/bin:$PATH"
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$lib/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CPATH="$root/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$lib:$lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # JSON::PP alone (pure Perl) from perl-modules: the whole folder would put
  # another perl's core modules ahead of this one's.
  local pp
  pp=$(ls -d "$root"/usr/share/perl/*/JSON/PP.pm 2>/dev/null | head -n 1)
  if [ -n "$pp" ]; then
    mkdir -p "$root/perl5lib/JSON"
    cp -r "$pp" "${pp%.pm}" "$root/perl5lib/JSON/"
    export PERL5LIB="$root/perl5lib${PERL5LIB:+:$PERL5LIB}"
  fi
}

# check_deps: every dependency found, or those in --deps unpacked, or one
# line naming what is missing and how to bring it.
check_deps() {
  local missing unpacked=""
  missing=$(missing_deps)
  if [ -n "$missing" ] && [ -n "$DEPS" ]; then
    use_deps "$DEPS" $missing
    unpacked="; unpacked from $DEPS: $missing"
    missing=$(missing_deps)
  fi
  if [ -n "$missing" ]; then
    local pkgs="" d
    for d in $missing; do pkgs+="${DEP_PACKAGES[$d]:-$d} "; done
    die "missing build dependencies: $missing (Debian: ${pkgs% }); here: $PROG --fetch-deps .gpu-deps, then carry .gpu-deps and pass --deps .gpu-deps (docs/gpu-machine.md)"
  fi
  echo "build dependencies: all found$unpacked" >>"$OUT/deps.log"
}

# --- or a pack built elsewhere (scripts/gpu-pack) --------------------------------

# pack_step: the pack unpacked into a fresh folder, which becomes BUILD (the
# binaries lie at their build paths); its libraries that this machine's
# loader cannot find, its C++ libraries even where the machine has one of
# the name (a C++ library has no ABI across builds: another distribution's
# libsentencepiece crashed tfm-tok on an H200 machine), and those the pack
# left to the machine (lib/NEEDED: CUDA's) that lie off the loader's path
# (CUDA's or PyTorch's folders), go on LD_LIBRARY_PATH (only those, so
# that the Python the benchmarks start keeps its own C libraries). In this
# shell, as the table's first row, like deps_step.
pack_step() {
  local start=$EPOCHREALTIME seconds dir libs known f n missing
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tfm-pack.XXXXXX")
  if command -v xz >/dev/null; then
    tar -xJf "$PACK" -C "$dir" || die "cannot unpack $PACK"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$PACK" "$dir" \
      || die "cannot unpack $PACK (no xz, and python3's tarfile failed)"
  fi
  [ -x "$dir/tests/tfm_cuda_tests" ] && [ -d "$dir/lib" ] || die "$PACK is not a pack of scripts/gpu-pack"
  libs=$dir/loader
  mkdir -p "$libs"
  known=$(ldconfig -p 2>/dev/null | awk 'NR > 1 { print $1 }')
  for f in "$dir"/lib/*.so*; do
    n=${f##*/}
    grep -qxF "$n" <<<"$known" && ! grep -qaF 'libstdc++.so.6' "$f" || ln -sf "$f" "$libs/$n"
  done
  while read -r n; do
    grep -qxF "$n" <<<"$known" && continue
    f=$(find /usr/local/cuda*/ /opt /usr/lib /usr/local/lib -name "$n" 2>/dev/null | head -n 1 || true)
    [ -n "$f" ] && ln -sf "$f" "$libs/$n"
  done <"$dir/lib/NEEDED"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  missing=$(ldd "$dir/tests/tfm_cuda_tests" "$dir/cmd/tfm-train" | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
  # What the programs open at run time (cuBLAS), which ldd cannot see: on
  # the loader's path, or linked in above. (A dry run on the CPU needs none.)
  if [ "$DEVICE" != cpu ]; then
    while read -r n; do
      [[ $n == libcublas* ]] || continue
      grep -qxF "$n" <<<"$known" || [ -e "$libs/$n" ] || missing="$missing$n "
    done <"$dir/lib/NEEDED"
  fi
  [ -z "$missing" ] || die "libraries the pack's programs need are found neither here nor in it: $missing"
  BUILD=$dir
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  n="$(ls "$libs" | wc -l) of its libraries on LD_LIBRARY_PATH: $(ls "$libs" | tr '\n' ' ')"
  printf 'unpack\tok\t%s\t%s\n' "$seconds" "$n" >>"$OUT/steps.tsv"
  printf '%s: %-12s %-8s %7s s  %s\n' "$PROG" unpack ok "$seconds" "$n"
}

# --- configure and build ------------------------------------------------------

# configure: CUDA on for a GPU (TFM_CUDA=ON: compiled whatever the driver
# check of AUTO would say), at ARCHS, with ninja when there is one, with the
# tests and benchmarks (a folder of Makefile.data's build has them off). A
# build folder configured before keeps its generator and, on the CPU, its
# options (the CPU dry run reuses ctest's own build).
configure() {
  local args=(-S "$GPU_SOURCE" -B "$BUILD" -DBUILD_TESTING=ON)
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    command -v ninja >/dev/null && args+=(-G Ninja)
    args+=(-DCMAKE_BUILD_TYPE=Release)
    [ "$DEVICE" = cpu ] && args+=(-DTFM_CUDA=OFF)
  fi
  [ "$DEVICE" = cpu ] || args+=(-DTFM_CUDA=ON "-DTFM_CUDA_ARCHITECTURES=$ARCHS")
  echo "cmake ${args[*]}"
  cmake "${args[@]}" | tee "$OUT/.configure"
  note "$(sed -n 's/^-- tfm [0-9.]*: //p' "$OUT/.configure"), $(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
  rm -f "$OUT/.configure"
}

# build TARGET...: on all cores.
build() {
  echo "cmake --build $BUILD -j $JOBS --target $*"
  cmake --build "$BUILD" -j "$JOBS" --target "$@"
  note "$# target(s), $JOBS jobs"
}

# --- steps and the table -------------------------------------------------------

FAILED=0
step() {
  local name=$1 limit=$2 status rc start end seconds note="" left
  shift 2
  CURRENT_STEP=$name
  rm -f "$OUT/$name.note"
  # What is left of the budget, less 10 s for the table and the kill's grace.
  left=$((STARTED + BUDGET - EPOCHSECONDS - 10))
  if [ "$left" -lt 5 ]; then
    printf '%s\tno-time\t0.0\t%s\n' "$name" "the --budget of $BUDGET s was spent" >>"$OUT/steps.tsv"
    printf '%s: %-12s %-8s %7s s  %s\n' "$PROG" "$name" no-time 0.0 "the --budget of $BUDGET s was spent"
    FAILED=1
    return 0
  fi
  [ "$limit" -gt 0 ] && [ "$limit" -le "$left" ] || limit=$left
  start=$EPOCHREALTIME
  set +e
  # timeout runs programs, not functions: a function runs in a child bash
  # given this one's functions (the variables are exported: set -a); what
  # it starts is in timeout's process group, and ends with it.
  timeout --kill-after=5 "$limit" bash -c "$(declare -f); set -euo pipefail; \"\$@\"" step "$@" \
    >"$OUT/$name.log" 2>&1 </dev/null
  rc=$?
  set -e
  end=$EPOCHREALTIME
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=ok ;;
    3) status=slow ;;      # a benchmark under its target: a result, not a failure
    77) status=skipped ;;
    124|137) status=TIMEOUT; FAILED=1 ;;
    *) status=FAIL; FAILED=1 ;;
  esac
  [ -f "$OUT/$name.note" ] && note=$(head -n 1 "$OUT/$name.note") && rm -f "$OUT/$name.note"
  # (A step that failed without a word leaves no note: not the script's end.)
  [ -z "$note" ] && [ "$status" != ok ] && note=$( (grep -v '^[[:space:]]*$' "$OUT/$name.log" || true) | tail -n 1 | cut -c1-110)
  [ "$status" = TIMEOUT ] && note="after ${limit} s; $note"
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$seconds" "$note" >>"$OUT/steps.tsv"
  printf '%s: %-12s %-8s %7s s  %s\n' "$PROG" "$name" "$status" "$seconds" "$note"
  return 0
}

# deps_step: check_deps in this shell (what it unpacks must stay in the
# environment of the steps after it), as the table's first row.
deps_step() {
  local start=$EPOCHREALTIME seconds
  : >"$OUT/deps.log"
  check_deps
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  printf 'deps\tok\t%s\t%s\n' "$seconds" "$(tail -n 1 "$OUT/deps.log")" >>"$OUT/steps.tsv"
  printf '%s: %-12s %-8s %7s s  %s\n' "$PROG" deps ok "$seconds" "$(tail -n 1 "$OUT/deps.log")"
}

# A step's one-line note (inside the step's command).
note() { echo "$*" >"$OUT/$CURRENT_STEP.note"; }

# table TITLE: the steps as a table, on stdout and in OUT/table.txt.
table() {
  {
    echo
    echo "$1"
    printf '%-14s %-8s %8s  %s\n' step status seconds note
    awk -F'\t' '{ printf "%-14s %-8s %8.1f  %s\n", $1, $2, $3, $4 }' "$OUT/steps.tsv"
    echo "logs: $OUT"
  } | tee "$OUT/table.txt"
}
