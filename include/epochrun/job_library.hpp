// Jobs in a shared library of your own, loaded at run time:
//
//   mpirun -np 3 epochrun run --job-library ./libmyjobs.so --job my_job ...
//
// The library defines its entry point once, in one of its source files, and registers its jobs
// there (not from static initializers such as EPOCHRUN_REGISTER_JOB: those would run on
// loading, before the ABI check; the loader refuses a library whose loading registered jobs):
//
//   EPOCHRUN_JOB_LIBRARY(registry) { register_my_jobs(registry); }
//
// and links epochrun::epochrun (CMake) or `pkg-config --libs epochrun`. The loader first
// asks the library for the ABI it was built against and refuses one that differs from its
// own (exit code 2): jobs are C++ objects crossing the boundary, and a library built for
// other definitions of them would crash or corrupt state rather than fail cleanly.
#pragma once

#include "epochrun/job_registry.hpp"

namespace epochrun {

// The job library ABI. It changes whenever a type that crosses the boundary (JobRegistry, Job,
// Workspace, Communicator, ...) changes incompatibly; a library built against other headers
// reports another number.
inline constexpr int kJobLibraryAbi = 4;

}  // namespace epochrun

// The two C symbols the loader looks up: epochrun_job_library_abi() (the ABI above, as the
// library saw it when compiled) and epochrun_register_jobs(registry), called once, after
// the ABI matched.
#define EPOCHRUN_JOB_LIBRARY(registry)                                               \
  extern "C" __attribute__((visibility("default"))) int epochrun_job_library_abi() { \
    return ::epochrun::kJobLibraryAbi;                                               \
  }                                                                                  \
  extern "C" __attribute__((visibility("default"))) void epochrun_register_jobs(     \
      ::epochrun::JobRegistry& registry)
