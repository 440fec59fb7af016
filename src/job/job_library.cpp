#include "job_library.hpp"

#include <dlfcn.h>

#include <string>

#include "epochrun/errors.hpp"
#include "epochrun/job_library.hpp"

namespace epochrun {
namespace {

using AbiFunction = int();
using RegisterFunction = void(JobRegistry&);

std::string last_dl_error() {
  const char* error = ::dlerror();
  return error != nullptr ? error : "unknown error";
}

}  // namespace

void load_job_library(const std::filesystem::path& file, JobRegistry& registry) {
  const std::string name = "--job-library '" + file.string() + "'";
  // A bare name would make dlopen search the library path instead of the file the user named.
  const auto path = file.has_parent_path() ? file : std::filesystem::path(".") / file;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw UsageError(name + " does not exist or is not a regular file" +
                     (error ? " (" + error.message() + ")" : ""));
  }
  // RTLD_NOW: an unresolved symbol (a library linked against another epochrun) fails here,
  // with the linker's message, not in the middle of a run. Never closed (see header).
  const auto registered_before = registry.all().size();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw UsageError(name + " cannot be loaded: " + last_dl_error());
  }
  // Jobs registered by the library's static initializers ran before its ABI could be checked.
  if (registry.all().size() != registered_before) {
    throw UsageError(name +
                     " registers jobs from static initializers (EPOCHRUN_REGISTER_JOB), which run "
                     "before its ABI can be checked: register them in EPOCHRUN_JOB_LIBRARY");
  }
  auto* abi = reinterpret_cast<AbiFunction*>(::dlsym(handle, "epochrun_job_library_abi"));
  auto* register_jobs =
      reinterpret_cast<RegisterFunction*>(::dlsym(handle, "epochrun_register_jobs"));
  if (abi == nullptr || register_jobs == nullptr) {
    throw UsageError(name +
                     " is not an epochrun job library: it lacks epochrun_job_library_abi() or "
                     "epochrun_register_jobs() (define them with EPOCHRUN_JOB_LIBRARY from "
                     "<epochrun/job_library.hpp>)");
  }
  if (const int built_for = abi(); built_for != kJobLibraryAbi) {
    throw UsageError(name + " was built for epochrun job library ABI " + std::to_string(built_for) +
                     ", this program has ABI " + std::to_string(kJobLibraryAbi) +
                     ": rebuild it against this epochrun");
  }
  try {
    register_jobs(registry);
  } catch (const std::exception& failure) {
    throw UsageError(name + ": " + failure.what());
  }
}

}  // namespace epochrun
