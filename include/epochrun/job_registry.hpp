// The registry of jobs the program can run, by name. Each job in jobs/ registers itself with
// a static `RegisterJob` object.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/job.hpp"

namespace epochrun {

// A registered job: its own options (bound to members of the definition) and how to build
// the Job once they are parsed.
class JobDefinition {
 public:
  virtual ~JobDefinition() = default;
  // Adds the job's options, each named `prefix` + key (prefix is "<job name>."), so that an
  // INI file sets them in a section named after the job.
  virtual void add_options(boost::program_options::options_description& options,
                           const std::string& prefix) {
    (void)options;
    (void)prefix;
  }
  // Called after the options are parsed and stored; throws UsageError on inconsistent values.
  virtual Job build() const = 0;
};

struct JobRegistration {
  std::string name;
  std::string summary;
  std::function<std::unique_ptr<JobDefinition>()> make;
};

class JobRegistry {
 public:
  static JobRegistry& instance();
  void add(JobRegistration registration);
  // nullptr when unknown.
  const JobRegistration* find(const std::string& name) const;
  std::vector<const JobRegistration*> all() const;  // sorted by name

 private:
  std::vector<JobRegistration> registrations_;
};

struct RegisterJob {
  explicit RegisterJob(JobRegistration registration) {
    JobRegistry::instance().add(std::move(registration));
  }
};

}  // namespace epochrun
