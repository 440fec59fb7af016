// The registry of jobs a program can run, by name. A job registers a declaration: a function
// that declares the job's options and returns the factory that builds the Job once the program
// has parsed them into the declared variables.
//
//   EPOCHRUN_REGISTER_JOB(my_job, "what it does",
//                         epochrun::with_options<MyOptions>(declare_my_options, make_my_job));
//
// A job library (--job-library) registers its jobs from its entry point instead
// (EPOCHRUN_JOB_LIBRARY, <epochrun/job_library.hpp>): static initializers would run on loading,
// before its ABI is checked, and the loader refuses a library whose loading registered jobs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/export.hpp"
#include "epochrun/job.hpp"
#include "epochrun/job_options.hpp"

namespace epochrun {

// Builds the Job from the option values parsed so far; throws UsageError on inconsistent values.
using JobFactory = std::function<Job()>;
// Declares the job's options into JobOptions and returns the factory that reads them. The
// variables the options are bound to must live as long as the factory (see with_options).
using JobDeclaration = std::function<JobFactory(JobOptions&)>;

struct JobRegistration {
  std::string name;
  std::string summary;
  JobDeclaration declare;
};

class EPOCHRUN_API JobRegistry {
 public:
  static JobRegistry& instance();
  // Throws Error for an invalid or repeated name.
  void add(JobRegistration registration);
  // nullptr when unknown.
  const JobRegistration* find(const std::string& name) const;
  std::vector<const JobRegistration*> all() const;  // sorted by name

 private:
  std::vector<JobRegistration> registrations_;
};

inline void register_job(std::string name, std::string summary, JobDeclaration declare) {
  JobRegistry::instance().add({std::move(name), std::move(summary), std::move(declare)});
}

// The usual declaration: the options are the members of an `Options` struct (its default
// member values are the defaults) that `declare_options(JobOptions&, Options&)` binds, and
// `build(const Options&) -> Job` makes the job. The struct lives in the factory.
template <typename Options, typename DeclareOptions, typename Build>
JobDeclaration with_options(DeclareOptions declare_options, Build build) {
  return [declare_options, build](JobOptions& options) -> JobFactory {
    auto values = std::make_shared<Options>();
    declare_options(options, *values);
    return [values, build] { return build(*values); };
  };
}

// Registers a job from a static initializer: `name` is an identifier, the job's name.
struct JobRegistrar {
  JobRegistrar(std::string name, std::string summary, JobDeclaration declare) {
    register_job(std::move(name), std::move(summary), std::move(declare));
  }
};

}  // namespace epochrun

#define EPOCHRUN_REGISTER_JOB(name, summary, declaration)                \
  static const ::epochrun::JobRegistrar epochrun_registered_job_##name { \
#name, summary, declaration                                          \
  }
