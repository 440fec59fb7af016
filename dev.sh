#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: installs the Debian packages epochrun needs
# when they are missing, configures and builds, then runs.
#
#   ./dev.sh run             sgd_regression on 3 MPI ranks with its built-in default configuration
#   ./dev.sh test            the whole test suite (ctest), the real-SLURM and multihost tests included
#   ./dev.sh build           install and build only
#   ./dev.sh install PREFIX  build, then install epochrun into PREFIX (headers, libepochrun.so,
#                            the program, CMake package, pkg-config file, slurm/ and config/)
#   ./dev.sh test-sanitized  the tests labelled `sanitized` (tests/CMakeLists.txt: the library in
#                            process, the program on bad input and damaged files), built by clang
#                            with AddressSanitizer + UBSan (./build-sanitized)
#   ./dev.sh fuzz [SECONDS]  the libFuzzer targets at once for SECONDS (default 60), from the
#                            same build (./build-sanitized)
#   ./dev.sh bench [ARGS]    checkpoint save/load against plain POSIX I/O on 3 ranks
#                            (ARGS go to `epochrun bench`, e.g. --mib-per-rank 256 --cold)
#
# The build goes to ./build (EPOCHRUN_BUILD_DIR overrides); `run` works in ./out.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${EPOCHRUN_BUILD_DIR:-$root/build}"

# What building the program needs; `run` and `install` install only these.
packages=(
  # toolchain
  g++ make cmake pkg-config
  # the design card's dependencies: Open MPI, parallel HDF5, Boost.Program_options
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev libboost-program-options-dev
  # well-kept libraries instead of hand-written code
  nlohmann-json3-dev libspdlog-dev libfmt-dev libxxhash-dev
)
# What the tests need besides.
test_packages=(
  # the design card's test framework
  libgtest-dev
  # the tests read checkpoints back with the ordinary HDF5 tools
  hdf5-tools python3-h5py
  # the durability tests observe epochrun's fsyncs
  strace
  # the Debian package's test: cpack's dpkg-shlibdeps
  dpkg-dev
  # the clusters of the SLURM and multi-host tests (tests/clusters): SLURM and munge, the
  # GlusterFS server and FUSE client of the hosts' shared volume, ip for their namespaces
  slurmctld slurmd slurm-client munge glusterfs-server glusterfs-client iproute2
  # the Python package's tests (python/tests): its dependencies, pytest, pandas for its
  # DataFrames, and ParaView's own Python, rendering in a virtual X server (Debian's ParaView
  # has no offscreen build)
  python3-numpy python3-xxhash python3-pytest python3-pandas python3-paraview xvfb xauth
  # the Python bindings (python/bindings: jobs written in Python under the runner), mpi4py for
  # the communicator they accept and hand to tasks, and PyTorch for the data-parallel example
  # (examples/python/torch_ddp.py; about 35 s to install its 54 packages here)
  python3-dev pybind11-dev python3-mpi4py python3-torch
)
fuzz_packages=(clang libclang-rt-14-dev)

install_packages() {
  local missing=()
  for package in "${packages[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return
  fi
  echo "dev.sh: installing ${missing[*]}" >&2
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# configure DIR [cmake options...]
# Optimised, with line tables only (-g1): backtraces, gdb's `bt` and the sanitizers' reports
# keep file and line, and the build takes about a quarter less time than with full debug
# information (configure by hand with -DCMAKE_BUILD_TYPE=Debug to inspect variables).
configure() {
  local directory="$1"
  shift
  cmake -S "$root" -B "$directory" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    "$@" >/dev/null
}

# build_project DIR [cmake options...]: everything, the tests included.
build_project() {
  configure "$1" -DEPOCHRUN_BUILD_TESTS=ON "${@:2}"
  cmake --build "$1" -j "$(nproc)"
}

# build_program: the library and the program only (what `run`, `install` and `bench` need;
# without the tests, GoogleTest is not needed either).
build_program() {
  configure "$build" -DEPOCHRUN_BUILD_TESTS=OFF
  cmake --build "$build" -j "$(nproc)" --target epochrun epochrun_program
}

# build_sanitized: ./build-sanitized, clang with AddressSanitizer + UBSan and libFuzzer's
# instrumentation: the library, the program, the tests labelled sanitized and the fuzz targets.
# One build for both `test-sanitized` and `fuzz` (compiling the library twice more took CI past
# its time); without the Python bindings, which no sanitized test loads.
build_sanitized() {
  CC=clang CXX=clang++ build_project "$root/build-sanitized" -DEPOCHRUN_FUZZ=ON -DEPOCHRUN_PYTHON=OFF
}

# Open MPI refuses to run as root unless told twice, and 3 ranks on a 2-core laptop need
# oversubscription: both are set here, not left in the user's way.
mpi_environment() {
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  export OMPI_MCA_rmaps_base_oversubscribe=1
}

case "${1:-}" in
  build)
    install_packages "${test_packages[@]}"
    build_project "$build"
    ;;
  install)
    [[ -n "${2:-}" ]] || { echo "usage: ./dev.sh install PREFIX" >&2; exit 2; }
    install_packages
    build_program
    cmake --install "$build" --prefix "$2"
    ;;
  run)
    install_packages
    build_program
    mpi_environment
    mkdir -p "$root/out"
    cd "$root/out"
    # A demo starts from scratch: its own checkpoints from an earlier demo run are removed.
    rm -rf checkpoints summary.json sgd_model.h5
    mpirun -np 3 "$build/epochrun" run --job sgd_regression --checkpoint-dir checkpoints \
      --summary-json summary.json
    echo "dev.sh: checkpoints in out/checkpoints, summary in out/summary.json, model in out/sgd_model.h5"
    "$build/epochrun" inspect checkpoints | head -n 4
    ;;
  test)
    install_packages "${test_packages[@]}"
    build_project "$build"
    mpi_environment
    cd "$build"
    # Two lanes (tests/CMakeLists.txt): the SLURM and multihost tests beside the others.
    ctest --output-on-failure --timeout 900 -j 3
    ;;
  test-sanitized)
    install_packages "${test_packages[@]}" "${fuzz_packages[@]}"
    build_sanitized
    mpi_environment
    # Open MPI and HDF5 keep global allocations until exit, which LeakSanitizer reports as
    # leaks of theirs; memory errors and undefined behaviour still fail the run.
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    cd "$root/build-sanitized"
    # Only the tests labelled sanitized are built here (tests/CMakeLists.txt says which, and why).
    ctest --output-on-failure --timeout 1800 -L sanitized
    ;;
  fuzz)
    seconds="${2:-60}"
    install_packages "${test_packages[@]}" "${fuzz_packages[@]}"
    build_sanitized
    mpi_environment
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    # Seeds: a real checkpoint, the shipped INI files (a leading NUL selects INI mode), names.
    mkdir -p "$work"/{integrity_header,config,names}
    (cd "$work" && ASAN_OPTIONS=detect_leaks=0 "$root/build-sanitized/epochrun" run --job sum_pipeline --checkpoint-dir ck --log-level off)
    cp "$work/ck/epoch-000002.h5" "$work/integrity_header/seed"
    for ini in "$root"/config/*.ini; do { printf '\0'; cat "$ini"; } >"$work/config/$(basename "$ini")"; done
    printf 'epoch-000005.h5' >"$work/names/file"
    printf 'latest' >"$work/names/resume"
    # The targets run at once, each for the whole time: libFuzzer is single-threaded, and the
    # machine's cores share the three (each artifact prefix its own).
    targets=(integrity_header config names)
    pids=()
    for target in "${targets[@]}"; do
      mkdir -p "$work/artifacts-$target"
      (cd "$work" && exec "$root/build-sanitized/tests/fuzz/fuzz_$target" "$target" -max_total_time="$seconds" \
        -rss_limit_mb=2048 -artifact_prefix="$work/artifacts-$target/" >"$work/$target.log" 2>&1) &
      pids+=($!)
    done
    status=0
    for index in "${!targets[@]}"; do
      target="${targets[$index]}"
      if wait "${pids[$index]}"; then
        echo "fuzz_$target: $(grep -E '^#[0-9]+.*DONE' "$work/$target.log" | tail -1)"
      else
        echo "fuzz_$target: FINDING" >&2
        grep -E 'ERROR|SUMMARY|Test unit|what\(\)' "$work/$target.log" >&2 || true
        for artifact in "$work/artifacts-$target"/*; do
          [[ -e "$artifact" ]] && { echo "input (base64): $(base64 -w0 "$artifact")" >&2; }
        done
        status=1
      fi
    done
    exit "$status"
    ;;
  bench)
    shift
    install_packages
    build_program
    mpi_environment
    mkdir -p "$root/out"
    cd "$root/out"
    mpirun -np 3 "$build/epochrun" bench "$@"
    ;;
  *)
    echo "usage: ./dev.sh run | test | build | install PREFIX | test-sanitized | fuzz [SECONDS] | bench [ARGS]" >&2
    exit 2
    ;;
esac
