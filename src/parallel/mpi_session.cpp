#include "epochrun/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>

#include "epochrun/communicator.hpp"
#include "epochrun/errors.hpp"
#include "mpi_check.hpp"
#include "mpi_thread_level.hpp"

namespace epochrun {
namespace {

// Sets OMPI_MCA_io=romio321 when the user has not chosen; called before MPI_Init.
void prefer_romio_for_mpi_io() {
  // overwrite = 0: an explicit OMPI_MCA_io (or `mpirun --mca io ...`, which sets it) wins.
  setenv("OMPI_MCA_io", "romio321", 0);
}

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
  prefer_romio_for_mpi_io();
  int provided = 0;
  // MULTIPLE when the library has it (Open MPI does): an asynchronous save then writes its global
  // arrays collectively on its background thread. FUNNELED is enough for everything else.
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  try {
    require_funneled_threads();
  } catch (...) {
    MPI_Finalize();  // the destructor of a throwing constructor does not run
    throw;
  }
}

void require_funneled_threads() {
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  // The MPI_THREAD_* levels are ordered: SINGLE < FUNNELED < SERIALIZED < MULTIPLE.
  if (provided < MPI_THREAD_FUNNELED) {
    throw Error(
        "MPI provides only MPI_THREAD_SINGLE, but epochrun's asynchronous checkpoints write on "
        "a background thread while the main thread makes every MPI call: it needs "
        "MPI_THREAD_FUNNELED (initialise MPI with MPI_Init_thread)");
  }
}

bool mpi_calls_from_any_thread() {
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  return provided == MPI_THREAD_MULTIPLE;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Finalize();
  }
}

bool MpiSession::is_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

}  // namespace epochrun
