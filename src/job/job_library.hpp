// Loading jobs from a shared library (`--job-library FILE`; the library side is
// include/epochrun/job_library.hpp). Internal to the library and the program.
#pragma once

#include <filesystem>

#include "epochrun/job_registry.hpp"

namespace epochrun {

// Loads `file` and registers its jobs into `registry`. Throws UsageError, naming the file,
// when it cannot be loaded, has no job library entry point, was built for another ABI (then
// nothing of it has run), or its registration failed. A loaded library stays loaded until the
// process ends: its jobs' code lives in it.
void load_job_library(const std::filesystem::path& file, JobRegistry& registry);

}  // namespace epochrun
