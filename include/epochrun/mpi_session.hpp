// RAII ownership of MPI_Init / MPI_Finalize for a program.
#pragma once

namespace epochrun {

class MpiSession {
 public:
  // Also selects ROMIO as Open MPI's MPI-IO component unless OMPI_MCA_io is already set:
  // Open MPI 4.x's default (OMPIO, fcoll vulcan) is known to hang parallel-HDF5 collective
  // writes in which some ranks have nothing to write -- which is how a checkpoint that
  // stores each node's blobs in its own datasets writes. See docs/FORMAT.md.
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static bool is_initialized();
};

// Set OMPI_MCA_io=romio321 when the user has not chosen; call before MPI_Init.
void prefer_romio_for_mpi_io();

}  // namespace epochrun
