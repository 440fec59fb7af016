// The checks of `epochrun run`'s parsed options, each with the run option it gives: what the
// two parsing passes cannot refuse alone. Internal to the run subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <system_error>

#include "epochrun/job_runner.hpp"
#include "run/run_options.hpp"

namespace epochrun::cli {

// The run options `values` (parsed into `general`) ask for, for job `job` whose options
// `job_description` describes; UsageError for the first option that is wrong or contradicts
// another. Writes no file.
RunOptions checked_run_options(const boost::program_options::variables_map& values,
                               const GeneralOptions& general, const std::string& job,
                               const boost::program_options::options_description& job_description);

// " (why)" for a failed file system query, to end a usage error's line; "" when it did not fail.
std::string because(const std::error_code& error);

}  // namespace epochrun::cli
