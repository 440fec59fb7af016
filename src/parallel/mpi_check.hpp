// Error checks around raw MPI calls, for this layer's own use (a job calls the typed
// Communicator, which checks for it).
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {

// Throws MpiError with the MPI error string when `code` is not MPI_SUCCESS.
void check_mpi(int code, const char* call);

// `size` as MPI's int count; MpiError when it does not fit.
inline int to_count(std::size_t size, const char* what) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw MpiError(std::string(what) + ": " + std::to_string(size) +
                   " elements exceed MPI's int count");
  }
  return static_cast<int>(size);
}

}  // namespace epochrun
