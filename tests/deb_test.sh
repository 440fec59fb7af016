#!/usr/bin/env bash
# The Debian package as a site installs it (ctest label "install"): cpack -G DEB in the build
# directory; the package holds the program, the library, the public headers, the CMake package,
# the pkg-config file, the batch script and the INI files under /usr and depends on what they
# link; unpacked into a scratch root (dpkg-deb -x: the machine's own /usr is not touched), its
# program runs from there, and the out-of-tree kmeans example builds against the unpacked
# package with find_package(epochrun) and runs on 3 ranks. Every wait is bounded.
# Usage: deb_test.sh BUILD_DIR MPIEXEC
set -euo pipefail

build="$(cd "$1" && pwd)"
mpiexec="$2"
work="$(mktemp -d /tmp/epochrun-deb-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "deb_test: FAILED: $*" >&2
  exit 1
}
step() { echo "deb_test: $*"; }

step "cpack -G DEB"
(cd "$build" && timeout 300 cpack -G DEB -B "$work/packages" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb="$(ls "$work"/packages/epochrun_*.deb 2>/dev/null | head -n 1)"
[[ -n "$deb" ]] || { cat "$work/cpack.log"; fail "no .deb in $work/packages"; }
step "built $(basename "$deb")"

dpkg-deb -c "$deb" >"$work/contents"
for file in ./usr/bin/epochrun ./usr/lib/libepochrun.so.0 ./usr/include/epochrun/epochrun.hpp \
  ./usr/include/epochrun/checkpoint_manager.hpp ./usr/lib/cmake/epochrun/epochrunConfig.cmake \
  ./usr/lib/pkgconfig/epochrun.pc ./usr/share/epochrun/slurm/epochrun.sbatch \
  ./usr/share/doc/epochrun/examples/kmeans/CMakeLists.txt; do
  grep -q " $file\( \|$\)" "$work/contents" || fail "the package lacks $file"
done
depends="$(dpkg-deb -f "$deb" Depends)"
for needed in libhdf5-openmpi libopenmpi libboost-program-options; do
  [[ "$depends" == *"$needed"* ]] || fail "Depends lacks $needed: $depends"
done
step "Depends: $depends"

root="$work/root"
dpkg-deb -x "$deb" "$root"
# The unpacked program finds the unpacked library through its RUNPATH, not the build's.
timeout 60 env -u LD_LIBRARY_PATH "$root/usr/bin/epochrun" list-jobs >"$work/jobs" ||
  fail "the unpacked program did not run"
grep -q '^sgd_regression' "$work/jobs" || fail "the unpacked program lists no sgd_regression"
loaded="$(ldd "$root/usr/bin/epochrun" | awk '/libepochrun/ { print $3 }')"
[[ -n "$loaded" && "$(realpath "$loaded")" == "$(realpath "$root/usr/lib/libepochrun.so.0")" ]] ||
  fail "the unpacked program does not load the unpacked library: $(ldd "$root/usr/bin/epochrun")"

step "the kmeans example against the unpacked package (find_package)"
example="$root/usr/share/doc/epochrun/examples/kmeans"
timeout 300 cmake -S "$example" -B "$work/kmeans" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_TYPE=Release >"$work/kmeans.log" 2>&1 || { cat "$work/kmeans.log"; fail "configure"; }
timeout 600 cmake --build "$work/kmeans" -j2 >>"$work/kmeans.log" 2>&1 ||
  { cat "$work/kmeans.log"; fail "build"; }
grep -q "$root/usr/lib/cmake/epochrun" "$work/kmeans/CMakeCache.txt" ||
  fail "find_package did not take the unpacked package"
(cd "$work" && timeout 120 "$mpiexec" -n 3 --oversubscribe "$work/kmeans/kmeans" run --job kmeans \
  --checkpoint-dir ck >"$work/run.log" 2>&1) || { cat "$work/run.log"; fail "kmeans on 3 ranks"; }
[[ -e "$work/ck/index.json" ]] || fail "the kmeans run committed nothing"
echo "deb_test: passed"
