#!/usr/bin/env bash
# The README's first command: sets up this machine (Debian/Ubuntu packages,
# if missing and we are root), builds what the demo needs into build/, and
# runs the demo: two CUDA programs share one GPU under gshare, each with its
# own quota, while gshare-top shows them. Without a GPU the programs run
# over gshare's bundled fake driver, which emulates a GPU in host memory,
# and it says so.
#
#   tools/demo.sh [--installed] [--no-build]
#
#   --installed  run the installed gshare (the .deb, or cmake --install):
#                gshare-top from PATH and LD_PRELOAD=libgshare.so by name.
#                The demo's job program and the fake driver still come from
#                build/. Also GSHARE_DEMO_INSTALLED=1.
#   --no-build   use build/ as it is (tools/readme_check.py runs the demo so).
#
# GSHARE_DEMO_FAKE_GPU=1 runs over the fake driver even where a GPU exists;
# GSHARE_DEMO_BUILD_DIR names a build directory other than build/.
# The demo fails (exit 1) unless gshare-top lists both programs, so a
# library that was not loaded cannot pass for a working one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

installed=${GSHARE_DEMO_INSTALLED:-0}
build=1
for argument in "$@"; do
  case $argument in
    --installed) installed=1 ;;
    --no-build) build=0 ;;
    *) echo "usage: tools/demo.sh [--installed] [--no-build]" >&2; exit 2 ;;
  esac
done
fake_gpu=${GSHARE_DEMO_FAKE_GPU:-0}
BUILD=${GSHARE_DEMO_BUILD_DIR:-$ROOT/build}
# Read; not passed on: the preload warns of GSHARE_* names it does not know.
unset GSHARE_DEMO_INSTALLED GSHARE_DEMO_FAKE_GPU GSHARE_DEMO_BUILD_DIR

fail() {
  echo "== demo FAILED: $*" >&2
  exit 1
}

if [ "$build" = 1 ]; then
  packages="build-essential cmake nlohmann-json3-dev catch2 libcpp-httplib-dev pkgconf"
  missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
  if [ -n "$missing" ] && command -v apt-get >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      echo "== installing:" $missing
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
      echo "== missing packages ($missing); run as root or: sudo apt-get install $missing" >&2
      exit 1
    fi
  fi

  # Only what the demo runs: the preload, gshare-top, the job and the fake
  # driver (the tests and benchmarks build with `cmake --build build`).
  targets="gshare-demo-job fake_cuda fake_nvml"
  [ "$installed" = 1 ] || targets="gshare gshare-top $targets"
  echo "== configuring $BUILD"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  echo "== building $targets ($(nproc) jobs)"
  # One line per step; compiler output only if something goes wrong.
  start=$SECONDS
  if ! cmake --build "$BUILD" --target $targets -j"$(nproc)" 2>&1 |
      { grep --line-buffered -E '^\[ *[0-9]+%\]|error' || true; }; then
    fail "the build failed (run: cmake --build $BUILD --target $targets)"
  fi
  echo "== built in $((SECONDS - start)) s"
fi

if [ "$installed" = 1 ]; then
  TOP=$(command -v gshare-top) || fail "no gshare-top on PATH: install the package first"
  PRELOAD=libgshare.so
  echo "== the installed gshare: $TOP, LD_PRELOAD=$PRELOAD (found by the dynamic loader)"
else
  TOP=$BUILD/tools/gshare-top
  PRELOAD=$BUILD/libgshare.so
fi
JOB=$BUILD/tools/gshare-demo-job
[ -x "$JOB" ] || fail "$JOB is missing: run tools/demo.sh without --no-build"

DIR=$(mktemp -d /tmp/gshare-demo.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
export GSHARE_DIR=$DIR
if [ "$fake_gpu" != 1 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: $(nvidia-smi -L | head -n1)"
  JOB_A_MEM=6144; JOB_B_MEM=3072
else
  echo "== No GPU here: the demo runs over gshare's bundled fake driver (tests/fake_driver),"
  echo "   which emulates an 8 GiB GPU in host memory. On a machine with an NVIDIA GPU the"
  echo "   same command runs the same programs on the real GPU."
  export LD_LIBRARY_PATH=$BUILD/fake_driver FAKE_CUDA_DIR=$DIR FAKE_CUDA_MEM=8GiB
  JOB_A_MEM=3072; JOB_B_MEM=1024
fi

echo "== job A: quota 2GiB, wants $((JOB_A_MEM / 1024)) GiB, weight 3;  job B: quota 25% of the GPU, wants $((JOB_B_MEM / 1024)) GiB, weight 1"
echo "   policy fair: they take turns on the GPU, A three times as long as B"
export GSHARE_POLICY=fair
GSHARE_MEM_LIMIT=2GiB GSHARE_WEIGHT=3 LD_PRELOAD=$PRELOAD "$JOB" A "$JOB_A_MEM" 4 &
a=$!
GSHARE_MEM_LIMIT=25% GSHARE_WEIGHT=1 LD_PRELOAD=$PRELOAD "$JOB" B "$JOB_B_MEM" 4 &
b=$!
trap 'kill $a $b 2>/dev/null; rm -rf "$DIR"' EXIT
sleep 2.5

# Both programs must run under the library meant: listed by gshare-top, and
# with --installed mapped from outside build/.
for pid in $a $b; do
  "$TOP" --json | grep -q "\"pid\":$pid," || fail "gshare-top does not list process $pid: was $PRELOAD loaded?"
  loaded=$(grep -o '/[^ ]*libgshare\.so' "/proc/$pid/maps" | head -n1 || true)
  [ -n "$loaded" ] || fail "process $pid has no libgshare.so mapped"
  if [ "$installed" = 1 ]; then
    case $loaded in "$BUILD"/*) fail "process $pid loaded $loaded, not the installed library" ;; esac
  fi
done
[ "$installed" = 1 ] && echo "== both programs loaded $loaded"

echo "== gshare-top --once"
"$TOP" --once
wait $a || fail "job A failed"
wait $b || fail "job B failed"
trap 'rm -rf "$DIR"' EXIT
if [ "$installed" = 1 ]; then
  echo "== done. Watch live with: gshare-top"
else
  echo "== done. Watch live with: build/tools/gshare-top    (tests: see the README's second command)"
fi
