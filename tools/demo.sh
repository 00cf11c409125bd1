#!/usr/bin/env bash
# The README's first command: sets up this machine (Debian/Ubuntu packages,
# if missing and we are root), builds gshare into build/, and runs the demo:
# two CUDA programs share one GPU under gshare, each with its own quota,
# while gshare-top shows them. Without a GPU the programs run over gshare's
# bundled fake driver, which emulates a GPU in host memory, and it says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

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

echo "== building gshare in build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "   build/libgshare.so, build/tools/gshare-top"

DIR=$(mktemp -d /tmp/gshare-demo.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
export GSHARE_DIR=$DIR
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: $(nvidia-smi -L | head -n1)"
  JOB_A_MEM=6144; JOB_B_MEM=3072
else
  echo "== No GPU here: the demo runs over gshare's bundled fake driver (tests/fake_driver),"
  echo "   which emulates an 8 GiB GPU in host memory. On a machine with an NVIDIA GPU the"
  echo "   same command runs the same programs on the real GPU."
  export LD_LIBRARY_PATH=$ROOT/build/fake_driver FAKE_CUDA_DIR=$DIR FAKE_CUDA_MEM=8GiB
  JOB_A_MEM=3072; JOB_B_MEM=1024
fi

JOB=$ROOT/build/tools/gshare-demo-job
PRELOAD=$ROOT/build/libgshare.so
echo "== job A: quota 2GiB, wants $((JOB_A_MEM / 1024)) GiB, weight 3;  job B: quota 25% of the GPU, wants $((JOB_B_MEM / 1024)) GiB, weight 1"
echo "   policy fair: they take turns on the GPU, A three times as long as B"
export GSHARE_POLICY=fair
GSHARE_MEM_LIMIT=2GiB GSHARE_WEIGHT=3 LD_PRELOAD=$PRELOAD "$JOB" A "$JOB_A_MEM" 4 &
a=$!
GSHARE_MEM_LIMIT=25% GSHARE_WEIGHT=1 LD_PRELOAD=$PRELOAD "$JOB" B "$JOB_B_MEM" 4 &
b=$!
sleep 2.5
echo "== gshare-top --once"
"$ROOT/build/tools/gshare-top" --once
wait $a $b
echo "== done. Watch live with: build/tools/gshare-top    (tests: ctest --test-dir build --output-on-failure -j8)"
