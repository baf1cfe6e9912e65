#!/usr/bin/env bash
# bench/gpu/carry_deps.sh [DEST] - packs the headers and CMake package files of Eigen and
# Catch2 v2 from this (Debian) machine into DEST (default: .deps in the repository root,
# ignored by git) for a GPU machine that has nvcc and CMake but not them (docs/gpu.md,
# "The device script"): run.sh then builds and runs the Catch2 GPU suite there, with
#   CMAKE_PREFIX_PATH=$PWD/.deps/usr OUT=$OUT bench/gpu/run.sh
# (the `device` tool's run: carry [".deps"]). About 11 MB. Checks that CMake finds both
# packages in DEST alone (CMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF) before it reports success.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.deps}"
need=(/usr/include/eigen3 /usr/share/eigen3/cmake /usr/include/catch2 /usr/lib/cmake/Catch2)
for p in "${need[@]}"; do
  [[ -e "$p" ]] || { echo "carry_deps.sh: $p is missing (apt-get install libeigen3-dev catch2)" >&2; exit 1; }
done
rm -rf "$DEST/usr"
mkdir -p "$DEST/usr/include" "$DEST/usr/share/eigen3" "$DEST/usr/lib/cmake"
cp -r /usr/include/eigen3 /usr/include/catch2 "$DEST/usr/include/"
cp -r /usr/share/eigen3/cmake "$DEST/usr/share/eigen3/"
cp -r /usr/lib/cmake/Catch2 "$DEST/usr/lib/cmake/"
if [[ -f /usr/lib/libCatch2WithMain.a ]]; then cp /usr/lib/libCatch2WithMain.a "$DEST/usr/lib/"; fi
# the check: a project that finds both in DEST and nowhere else
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
cat > "$probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(carry_deps_probe LANGUAGES NONE)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Catch2 2 REQUIRED)
message(STATUS "carry_deps: Eigen3 ${Eigen3_VERSION} in ${Eigen3_DIR}, Catch2 ${Catch2_VERSION} in ${Catch2_DIR}")
EOF
if ! out="$(cmake -S "$probe" -B "$probe/b" -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF -DCMAKE_PREFIX_PATH="$DEST/usr" 2>&1)"; then
  echo "$out" >&2
  echo "carry_deps.sh: CMake does not find Eigen3 and Catch2 in $DEST/usr alone" >&2
  exit 1
fi
grep "carry_deps:" <<< "$out" | sed 's/^-- //'
case "$out" in *"$DEST/usr"*) ;; *) echo "carry_deps.sh: found outside $DEST/usr" >&2; exit 1 ;; esac
echo "carry_deps.sh: $(du -sh "$DEST" | cut -f1) in $DEST; on the device: CMAKE_PREFIX_PATH=\$PWD/$(basename "$DEST")/usr OUT=\$OUT bench/gpu/run.sh"
