// A job library built for another job library ABI, as one built against other epochrun
// headers would be: the loader must refuse it without calling its registration.
#include <cstdio>
#include <cstdlib>

#include "epochrun/job_library.hpp"

extern "C" __attribute__((visibility("default"))) int epochrun_job_library_abi() {
  return epochrun::kJobLibraryAbi + 1;
}

extern "C" __attribute__((visibility("default"))) void epochrun_register_jobs(
    epochrun::JobRegistry&) {
  std::fputs("other_abi: registration called\n", stderr);
  std::abort();
}
