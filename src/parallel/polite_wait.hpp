// Waiting for a non-blocking MPI request without holding a core. Open MPI makes progress only
// inside MPI calls, so a wait must keep testing; but a rank that spins in MPI_Test takes the
// core from the ranks it waits for whenever ranks outnumber cores (a laptop's `mpirun -np 3`,
// an oversubscribed node), and those are exactly the ranks it is waiting for.
#pragma once

#include <mpi.h>
#include <time.h>

#include <chrono>

namespace epochrun {

// Tests `request` until it completes or until `stop()` returns true (checked between tests: a
// deadline, a message that changes what to wait for). For the first 10 ms it tests again at
// once: a collective's intermediate ranks then pass messages on without delay, and when ranks
// outnumber cores Open MPI's progress engine yields the core inside each test (its
// mpi_yield_when_idle, on when it sees the node oversubscribed); a wait that lasts longer is one
// for slow work (a large write, a stuck rank), and it then sleeps an eighth of the time waited so
// far between tests (up to 2 ms): a late completion is seen at most ~12% late and a thousand
// waiting ranks wake at most 500 times a second each. True when the request completed.
template <typename Stop>
bool wait_politely(MPI_Request& request, Stop&& stop);

// The pause between two tests after `waited`, as described above (zero: none).
std::chrono::nanoseconds polite_pause(std::chrono::steady_clock::duration waited);

// MPI_Test, checked. True when the request completed.
bool request_done(MPI_Request& request);

template <typename Stop>
bool wait_politely(MPI_Request& request, Stop&& stop) {
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    if (request_done(request)) {
      return true;
    }
    if (stop()) {
      return false;
    }
    const auto pause = polite_pause(std::chrono::steady_clock::now() - started);
    if (pause.count() > 0) {
      struct timespec duration {
        0, static_cast<long>(pause.count())
      };
      ::nanosleep(&duration, nullptr);
    }
  }
}

}  // namespace epochrun
