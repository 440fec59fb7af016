#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: installs the Debian packages epochrun needs
# when they are missing, configures and builds, then runs.
#
#   ./dev.sh run    sgd_regression on 3 MPI ranks with its built-in default configuration
#   ./dev.sh test   the whole test suite (ctest)
#   ./dev.sh build  install and build only
#
# The build goes to ./build (EPOCHRUN_BUILD_DIR overrides); `run` works in ./out.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${EPOCHRUN_BUILD_DIR:-$root/build}"

packages=(
  # toolchain
  g++ make cmake pkg-config
  # the design card's dependencies: Open MPI, parallel HDF5, Boost.Program_options, GoogleTest
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev libboost-program-options-dev libgtest-dev
  # well-kept libraries instead of hand-written code
  nlohmann-json3-dev libspdlog-dev libfmt-dev libxxhash-dev
  # the tests read checkpoints back with the ordinary HDF5 tools
  hdf5-tools python3-h5py
)

install_packages() {
  local missing=()
  for package in "${packages[@]}"; do
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

build_project() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j "$(nproc)"
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
    install_packages
    build_project
    ;;
  run)
    install_packages
    build_project
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
    install_packages
    build_project
    mpi_environment
    cd "$build"
    ctest --output-on-failure --timeout 600
    ;;
  *)
    echo "usage: ./dev.sh run | test | build" >&2
    exit 2
    ;;
esac
