// The options `epochrun run` takes, as Boost.Program_options descriptions: its own, and the
// ones a job declares. Internal to the run subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "epochrun/job_registry.hpp"
#include "run/run_options.hpp"

namespace epochrun::cli {

// epochrun run's own options, each writing into its field of `o`.
boost::program_options::options_description general_options(GeneralOptions& o);

// The job's declared options as Boost options named `job` + "." + key, each writing into the
// variable it is bound to, with that variable's value as the default.
boost::program_options::options_description job_options_description(const JobOptions& declared,
                                                                    const std::string& job);

}  // namespace epochrun::cli
