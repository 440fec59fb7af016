// RAII ownership of MPI_Init / MPI_Finalize for a program.
#pragma once

#include "epochrun/export.hpp"

namespace epochrun {

class EPOCHRUN_API MpiSession {
 public:
  // Initialises MPI at MPI_THREAD_FUNNELED (Error when MPI provides less). Also selects ROMIO as
  // Open MPI's MPI-IO component unless OMPI_MCA_io is already set: Open MPI 4.x's default (OMPIO,
  // fcoll vulcan) is known to hang parallel-HDF5 collective writes in which some ranks have nothing
  // to write. Checkpoints make no MPI-IO call (POSIX I/O at the offsets HDF5 laid out); a job's
  // own tasks may. See docs/FORMAT.md, "MPI and HDF5 settings".
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static bool is_initialized();
};

// Throws Error unless MPI runs at MPI_THREAD_FUNNELED or above: an asynchronous checkpoint's
// data is written by a background thread that makes no MPI call. MpiSession initialises MPI
// at that level and checks it; a program that initialises MPI itself is checked by the runner.
EPOCHRUN_API void require_funneled_threads();

}  // namespace epochrun
