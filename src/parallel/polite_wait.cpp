#include "polite_wait.hpp"

#include <algorithm>

#include "mpi_check.hpp"

namespace epochrun {

std::chrono::nanoseconds polite_pause(std::chrono::steady_clock::duration waited) {
  using std::chrono::microseconds;
  if (waited < std::chrono::milliseconds(10)) {
    return std::chrono::nanoseconds(0);
  }
  return std::clamp(std::chrono::duration_cast<std::chrono::nanoseconds>(waited / 8),
                    std::chrono::nanoseconds(microseconds(20)),
                    std::chrono::nanoseconds(microseconds(2000)));
}

bool request_done(MPI_Request& request) {
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

}  // namespace epochrun
