// RAII ownership of MPI_Init / MPI_Finalize for a program.
#pragma once

#include "epochrun/export.hpp"

namespace epochrun {

class EPOCHRUN_API MpiSession {
 public:
  // Initialises MPI at MPI_THREAD_MULTIPLE, or the most MPI provides (Error below
  // MPI_THREAD_FUNNELED): at MULTIPLE an asynchronous save writes its global arrays on its
  // background thread, below it at the next epoch boundary. Also selects ROMIO as Open MPI's
  // MPI-IO component unless OMPI_MCA_io is already set: Open MPI 4.x's default (OMPIO, fcoll
  // vulcan) is known to hang parallel-HDF5 collective writes in which some ranks have nothing to
  // write. Checkpoints write per-node and replicated blobs with POSIX I/O at the offsets HDF5
  // laid out, and global arrays with collective MPI-IO. See docs/FORMAT.md, "MPI and HDF5
  // settings".
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static bool is_initialized();
};

// Throws Error unless MPI runs at MPI_THREAD_FUNNELED or above: an asynchronous checkpoint's
// data is written by a background thread, which makes MPI calls (the collective writes of global
// arrays, on a communicator of its own) only at MPI_THREAD_MULTIPLE. MpiSession asks for
// MPI_THREAD_MULTIPLE and checks this; a program that initialises MPI itself is checked by the
// runner.
EPOCHRUN_API void require_funneled_threads();

}  // namespace epochrun
