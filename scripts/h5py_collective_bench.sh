#!/bin/sh
# The collective hyperslab write and read of `epochrun bench --global-arrays`, done by h5py +
# mpi4py on the same decomposition (scripts/h5py_collective_bench.py says what it times).
#
#   scripts/h5py_collective_bench.sh [--ranks R] [--mib-per-rank M] [--rounds N] [--dir DIR] [--cold]
#
# Installs Debian's python3-h5py-mpi and python3-mpi4py when $PYTHON cannot import h5py with
# MPI support and mpi4py: as root with `apt-get update` and `apt-get -y install` (printing both
# commands first); otherwise it prints the command to run and exits with 2. Then runs the
# script on R ranks (default 3) and prints its JSON lines (one per measure). $PYTHON picks the
# interpreter (default /usr/bin/python3, where Debian's packages install, else python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ranks=3
if [ "${1:-}" = --ranks ]; then
  ranks=$2
  shift 2
fi
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
packages="python3-h5py-mpi python3-mpi4py"
# Debian's h5py picks its MPI build under mpirun; H5PY_ALWAYS_USE_MPI asks for it here too.
have_modules() {
  H5PY_ALWAYS_USE_MPI=1 "$PYTHON" -c 'import h5py, mpi4py, numpy, sys
sys.exit(0 if h5py.get_config().mpi else 1)' >/dev/null 2>&1
}
if ! have_modules; then
  if [ "$(id -u)" != 0 ]; then
    echo "h5py_collective_bench.sh: $PYTHON lacks h5py with MPI or mpi4py; as root: apt-get -y install $packages" >&2
    exit 2
  fi
  echo "h5py_collective_bench.sh: $PYTHON lacks h5py with MPI or mpi4py; installing them:" >&2
  echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -y install $packages" >&2
  apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get -y -qq install $packages >&2
  have_modules || { echo "h5py_collective_bench.sh: still no h5py with MPI after installing $packages" >&2; exit 2; }
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HDF5_USE_FILE_LOCKING=FALSE
echo "h5py_collective_bench.sh: $ranks ranks; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec mpirun -np "$ranks" "$PYTHON" "$here/h5py_collective_bench.py" "$@"
