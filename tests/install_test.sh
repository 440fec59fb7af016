#!/usr/bin/env bash
# The installed package as a user meets it (ctest label "install"):
#   cmake --install into a temporary prefix; what lands where; the library exports its declared
#   API only (exported_symbols_test.py); every public header compiles alone with only MPI
#   besides it and pulls in no private dependency; the out-of-tree kmeans example builds with
#   find_package(epochrun) and with pkg-config; it runs on 3 ranks; a run SIGKILLed after the
#   commit of epoch 3 resumes from `latest` and ends with centroids bit-identical to an
#   uninterrupted run's; the same job runs through `epochrun run --job-library`; the Python package
#   (with its bindings, where they were built) is installed and runs the README's Python job.
# Every wait is bounded. Usage: install_test.sh BUILD_DIR MPIEXEC
set -euo pipefail

build="$(cd "$1" && pwd)"
mpiexec="$2"
work="$(mktemp -d /tmp/epochrun-install-test.XXXXXX)"
job_pid=""
# SIGKILL to every process of the session the job was started in (setsid): mpiexec and its
# ranks, which Open MPI puts into process groups of their own.
kill_job() {
  local pids
  pids="$(ps -e -o pid=,sid= | awk -v sid="$job_pid" '$2 == sid { print $1 }')"
  if [[ -n "$pids" ]]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
  fi
  wait "$job_pid" 2>/dev/null || true
  job_pid=""
}
cleanup() {
  if [[ -n "$job_pid" ]]; then kill_job; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "install_test: FAILED: $*" >&2
  exit 1
}
step() { echo "install_test: $*"; }

prefix="$work/prefix"
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir="$prefix/lib"
for file in bin/epochrun lib/libepochrun.so lib/libepochrun.so.0 \
  lib/cmake/epochrun/epochrunConfig.cmake lib/cmake/epochrun/epochrunConfigVersion.cmake \
  lib/cmake/epochrun/epochrunTargets.cmake lib/pkgconfig/epochrun.pc \
  include/epochrun/epochrun.hpp include/epochrun/run_main.hpp include/epochrun/job_library.hpp \
  share/epochrun/slurm/epochrun.sbatch share/epochrun/config/sgd_regression.ini \
  share/doc/epochrun/examples/kmeans/CMakeLists.txt; do
  [[ -e "$prefix/$file" ]] || fail "not installed: $file"
done
[[ -x "$prefix/share/epochrun/slurm/epochrun.sbatch" ]] || fail "the batch script lost its x bit"
soname="$(readelf -d "$libdir/libepochrun.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')"
[[ "$soname" == libepochrun.so.0 ]] || fail "SONAME is '$soname', not libepochrun.so.0"
# The installed library exports the declared API only, as the built one does.
python3 "$(dirname "$0")/exported_symbols_test.py" "$libdir/libepochrun.so" \
  "$(dirname "$0")/exported_symbols.txt" >"$work/symbols.log" ||
  { cat "$work/symbols.log"; fail "the installed library exports more than its API"; }
# The installed program finds its library in the prefix, with no LD_LIBRARY_PATH.
"$prefix/bin/epochrun" list-jobs | grep -q '^sgd_regression' || fail "installed epochrun list-jobs"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
step "every public header alone, with \`pkg-config --cflags epochrun\` (MPI) only"
read -r -a cflags <<<"$(pkg-config --cflags epochrun)"
leaks=()
for header in "$prefix"/include/epochrun/*.hpp; do
  name="epochrun/$(basename "$header")"
  echo "#include <$name>" >"$work/header.cpp"
  g++ -std=c++20 -fsyntax-only -MD -MF "$work/header.d" "${cflags[@]}" "$work/header.cpp" ||
    fail "$name does not compile on its own"
  grep -E -o '[^ ]*/(spdlog|nlohmann|boost|hdf5|fmt|xxhash)[^ ]*' "$work/header.d" \
    >"$work/leaks" || true
  if [[ -s "$work/leaks" ]]; then
    leaks+=("$name (e.g. $(head -1 "$work/leaks"))")
  fi
done

((${#leaks[@]} == 0)) || fail "public headers that include a private dependency: ${leaks[*]}"

example="$prefix/share/doc/epochrun/examples/kmeans"
step "the kmeans example with find_package(epochrun)"
cmake -S "$example" -B "$work/with-cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/with-cmake.log" || { cat "$work/with-cmake.log"; fail "configure (find_package)"; }
cmake --build "$work/with-cmake" -j2 >>"$work/with-cmake.log" 2>&1 ||
  { cat "$work/with-cmake.log"; fail "build (find_package)"; }
step "the kmeans example with pkg-config"
cmake -S "$example" -B "$work/with-pkg-config" -DKMEANS_USE_PKG_CONFIG=ON \
  -DCMAKE_BUILD_TYPE=Release >"$work/with-pkg-config.log" ||
  { cat "$work/with-pkg-config.log"; fail "configure (pkg-config)"; }
cmake --build "$work/with-pkg-config" -j2 >>"$work/with-pkg-config.log" 2>&1 ||
  { cat "$work/with-pkg-config.log"; fail "build (pkg-config)"; }

kmeans_options=(--job kmeans --log-level warn)
cd "$work"
# run3 PROGRAM ARGS...: the program on 3 ranks, bounded by `timeout`.
run3() {
  timeout 120 "$mpiexec" -n 3 --oversubscribe "$@"
}

step "uninterrupted run on 3 ranks (find_package build)"
run3 "$work/with-cmake/kmeans" run "${kmeans_options[@]}" --checkpoint-dir full \
  --summary-json full.json || fail "the uninterrupted run failed"

step "a run SIGKILLed after the commit of epoch 3, then resumed from latest"
# The ranks pause (SIGSTOP, docs/TESTING.md) when epoch 6 starts, so the run cannot finish before
# the kill; the kill lands anywhere from the commit of epoch 3 on, a save in progress included.
EPOCHRUN_FAULT=epoch-task@6:STOP setsid "$mpiexec" -n 3 --oversubscribe \
  "$work/with-pkg-config/kmeans" run "${kmeans_options[@]}" --checkpoint-dir killed \
  >killed.log 2>&1 &
job_pid=$!
for _ in $(seq 1200); do
  [[ -e killed/epoch-000003.h5 ]] && break
  kill -0 "$job_pid" 2>/dev/null || { cat killed.log; fail "the run ended before epoch 3"; }
  sleep 0.1
done
[[ -e killed/epoch-000003.h5 ]] || fail "no epoch 3 within 120 s"
kill_job
run3 "$work/with-pkg-config/kmeans" run "${kmeans_options[@]}" --checkpoint-dir killed \
  --resume-from-epoch latest --summary-json resumed.json || fail "the resumed run failed"

step "the same job through epochrun run --job-library"
"$prefix/bin/epochrun" list-jobs --job-library "$work/with-cmake/libkmeans_jobs.so" |
  grep -q '^kmeans' || fail "list-jobs --job-library does not list kmeans"
run3 "$prefix/bin/epochrun" run --job-library "$work/with-pkg-config/libkmeans_jobs.so" \
  "${kmeans_options[@]}" --checkpoint-dir library --summary-json library.json ||
  fail "the --job-library run failed"

# The Python package, where the build made its bindings: installed with them under
# lib/python3/dist-packages (where Debian's python3 looks under /usr), its extension finding the
# prefix's library, and the README's Python job running from it.
if compgen -G "$build/python/epochrun/_core*.so" >/dev/null; then
  step "the Python package: installed, and the README's Python job on 3 ranks from it"
  packages="$prefix/lib/python3/dist-packages"
  for file in epochrun/__init__.py epochrun/runner.py epochrun/checkpoint.py; do
    [[ -e "$packages/$file" ]] || fail "not installed: lib/python3/dist-packages/$file"
  done
  core="$(compgen -G "$packages/epochrun/_core*.so")" || fail "not installed: epochrun/_core*.so"
  found="$(ldd "$core" | awk '$1 == "libepochrun.so.0" { print $3 }')"
  [[ -n "$found" && "$(realpath "$found")" == "$(realpath "$libdir/libepochrun.so.0")" ]] ||
    fail "the installed extension does not find the prefix's library: $(ldd "$core" | grep epochrun)"
  PYTHONPATH="$packages" run3 /usr/bin/python3 \
    "$prefix/share/doc/epochrun/examples/python/running_mean.py" --checkpoint-dir python \
    --log-level warn >python.log 2>&1 || { cat python.log; fail "the Python job failed"; }
  grep -q "^mean of 15000 numbers" python.log || { cat python.log; fail "the Python job's output"; }
fi

step "final centroids: bit-identical"
python3 - full.json resumed.json library.json <<'PY' || fail "the results differ"
import json, sys
full, resumed, library = (json.load(open(name)) for name in sys.argv[1:])
iterations = full["outputs"]["trainer_0"]["iteration"]["values"][0]
assert iterations >= 7, f"converged after {iterations} iterations: too early to test a kill"
assert resumed["resumed_from"] is not None and resumed["resumed_from"] >= 3, resumed["resumed_from"]
for name, other in (("resumed", resumed), ("job library", library)):
    for node, blobs in full["outputs"].items():
        for blob in ("centroids", "iteration"):
            a, b = blobs[blob], other["outputs"][node][blob]
            assert (a["xxh64"], a["values"]) == (b["xxh64"], b["values"]), (name, node, blob, a, b)
print(f"install_test: {iterations} iterations; resumed from epoch {resumed['resumed_from']}; "
      f"centroids xxh64 {full['outputs']['trainer_0']['centroids']['xxh64']} in all three runs")
PY
step "passed"
