// What MPI lets threads do in this process. Internal to the library.
#pragma once

namespace epochrun {

// Whether MPI runs at MPI_THREAD_MULTIPLE: any thread may make MPI calls, on different
// communicators at once. MpiSession asks for it; a program that initialises MPI itself may not.
bool mpi_calls_from_any_thread();

}  // namespace epochrun
