#!/usr/bin/env bash
# The Debian package as a site installs it (ctest label "install"): cpack -G DEB in the build
# directory; the package holds the program, the library, the public headers, the CMake package,
# the pkg-config file, the batch script and the INI files under /usr and depends on what they
# link; unpacked into a scratch root (dpkg-deb -x: the machine's own /usr is not touched), its
# program runs from there, and the out-of-tree kmeans example builds against the unpacked
# package with find_package(epochrun) and runs on 3 ranks; the Python package's running_mean
# example runs on 3 ranks from the unpacked package (its compiled part loading the unpacked
# library) and its checkpoint is read back by the unpacked reader. Every wait is bounded.
# Usage: deb_test.sh BUILD_DIR MPIEXEC [PYTHON]   (PYTHON: the interpreter the bindings were built
# for; without it the Python package is not checked)
set -euo pipefail

build="$(cd "$1" && pwd)"
mpiexec="$2"
python="${3:-}"
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
needed_packages=(libhdf5-openmpi libopenmpi libboost-program-options)
site=usr/lib/python3/dist-packages
if [[ -n "$python" ]]; then
  for file in ./$site/epochrun/__init__.py ./$site/epochrun/runner.py ./$site/epochrun/manager.py \
    ./usr/share/doc/epochrun/examples/python/running_mean.py; do
    grep -q " $file\( \|$\)" "$work/contents" || fail "the package lacks $file"
  done
  grep -q " ./$site/epochrun/_core[^ ]*\.so$" "$work/contents" ||
    fail "the package lacks the Python package's compiled part ($site/epochrun/_core*.so)"
  needed_packages+=(python3-numpy python3-h5py python3-mpi4py "python3 (>= 3.")
fi
depends="$(dpkg-deb -f "$deb" Depends)"
for needed in "${needed_packages[@]}"; do
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

if [[ -n "$python" ]]; then
  step "a Python job from the unpacked package"
  core="$(ls "$root/$site"/epochrun/_core*.so)"
  loaded="$(env -u LD_LIBRARY_PATH ldd "$core" | awk '/libepochrun/ { print $3 }')"
  [[ -n "$loaded" && "$(realpath "$loaded")" == "$(realpath "$root/usr/lib/libepochrun.so.0")" ]] ||
    fail "the unpacked Python package does not load the unpacked library: $(ldd "$core")"
  (cd "$work" && timeout 120 env -u LD_LIBRARY_PATH PYTHONPATH="$root/$site" PYTHONDONTWRITEBYTECODE=1 \
    "$mpiexec" -n 3 --oversubscribe "$python" \
    "$root/usr/share/doc/epochrun/examples/python/running_mean.py" --checkpoint-dir pyck \
    --num-epochs 3 >"$work/python.log" 2>&1) || { cat "$work/python.log"; fail "running_mean.py on 3 ranks"; }
  (cd "$work" && timeout 60 env PYTHONPATH="$root/$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import epochrun, sys
assert epochrun.__file__.startswith(sys.argv[1]), epochrun.__file__
print(epochrun.open("pyck").latest().epoch)' "$root/$site" >"$work/read.log" 2>&1) ||
    { cat "$work/read.log"; fail "the unpacked reader"; }
  [[ "$(cat "$work/read.log")" == 3 ]] || fail "the Python job's latest epoch: $(cat "$work/read.log")"
fi
echo "deb_test: passed"
