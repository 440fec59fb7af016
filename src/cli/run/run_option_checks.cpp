#include "run/run_option_checks.hpp"

#include <cmath>
#include <filesystem>
#include <sstream>
#include <typeinfo>

#include "epochrun/errors.hpp"
#include "local_redundancy_options.hpp"
#include "preemption_signals.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;

// With --no-checkpoints, an option about checkpoints is a contradiction: UsageError naming it.
void refuse_with_no_checkpoints(const po::variables_map& values) {
  for (const char* option :
       {"checkpoint-dir", "resume-from-epoch", "upload-dir", "keep-last", "keep-every",
        "checkpoint-every", "checkpoint-interval", "mtbf", "delete-checkpoints-on-success",
        "no-directory-lock", "local-dir", "flush-every", "flush-interval", "local-keep",
        "local-redundancy", "xdmf"}) {
    const auto found = values.find(option);
    // A switch set to false in the INI file is no contradiction.
    const bool given = found != values.end() && !found->second.defaulted() &&
                       !(found->second.value().type() == typeid(bool) && !found->second.as<bool>());
    if (given) {
      throw UsageError(std::string("--no-checkpoints cannot be combined with --") + option);
    }
  }
}

// `value` as a usage error shows it.
std::string shown(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// A finite number of seconds, more than 0 (or at least 0 when `zero_allowed`).
void require_seconds(double value, const std::string& option, bool zero_allowed) {
  const bool ok = std::isfinite(value) && (zero_allowed ? value >= 0 : value > 0);
  if (!ok) {
    throw UsageError(option + " must be a number of seconds " +
                     (zero_allowed ? "of at least 0" : "more than 0") + ", got " + shown(value));
  }
}

// A timeout in seconds: more than 0 and at most a day. UsageError otherwise.
std::chrono::duration<double> timeout_option(const std::string& flag, double seconds) {
  if (!(seconds > 0 && seconds <= 86400)) {
    throw UsageError(flag + " must be more than 0 and at most 86400 seconds, got " +
                     shown(seconds));
  }
  return std::chrono::duration<double>(seconds);
}

// A checkpoint directory that can never hold a checkpoint -- a file, a symlink loop or a
// dangling symlink on its path, a path through a file -- is refused before the run, rather than
// failing every save of it. One that exists, or can be created under its nearest existing
// ancestor, passes: what fails later (permissions, space) is the run's to report.
void check_checkpoint_directory(const std::filesystem::path& directory) {
  auto refuse = [&](const std::string& why) {
    throw UsageError("--checkpoint-dir '" + directory.string() +
                     "' can never hold a checkpoint: " + why);
  };
  for (auto path = directory; path.has_relative_path(); path = path.parent_path()) {
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (std::filesystem::is_directory(status)) {
      return;
    }
    if (status.type() != std::filesystem::file_type::not_found) {
      refuse(error ? path.string() + ": " + error.message()
                   : path.string() + " is not a directory");
    }
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(path, error))) {
      refuse(path.string() + " is a dangling symbolic link");
    }
  }
}

// --checkpoint-dir, unless --no-checkpoints (which no checkpoint option may come with).
void check_checkpoint_location(const po::variables_map& values, const GeneralOptions& general,
                               RunOptions& run) {
  if (general.no_checkpoints) {
    refuse_with_no_checkpoints(values);
  } else {
    if (general.checkpoint_dir.empty()) {
      throw UsageError("--checkpoint-dir must not be empty");
    }
    check_checkpoint_directory(general.checkpoint_dir);
    run.checkpoint_dir = general.checkpoint_dir;
  }
}

// A --summary-json that could not be written at the end of the run is refused before it.
void check_summary_file(const std::string& summary_json) {
  auto parent = std::filesystem::path(summary_json).parent_path();
  std::error_code file_error, parent_error;
  if (summary_json.empty() || std::filesystem::is_directory(summary_json, file_error) ||
      (!parent.empty() && !std::filesystem::is_directory(parent, parent_error))) {
    throw UsageError("--summary-json '" + summary_json +
                     "' must name a file in an existing directory" + because(parent_error));
  }
}

// Where the run starts and ends, and what it leaves behind: --resume-from-epoch, --num-epochs,
// --upload-dir, --summary-json.
void check_span_and_outputs(const po::variables_map& values, const GeneralOptions& general,
                            RunOptions& run) {
  if (values.count("resume-from-epoch")) {
    run.resume = ResumeRequest::parse(general.resume);
  }
  if (values.count("num-epochs")) {
    if (general.num_epochs < 1) {
      throw UsageError("--num-epochs must be at least 1, got " +
                       std::to_string(general.num_epochs));
    }
    run.num_epochs = general.num_epochs;
  }
  if (values.count("upload-dir")) {
    run.uploader = make_uploader(general.upload_dir);
  }
  if (values.count("summary-json")) {
    check_summary_file(general.summary_json);
  }
}

// Which epochs are checkpointed and which checkpoints stay: --keep-last, --keep-every,
// --checkpoint-every, --checkpoint-interval, --delete-checkpoints-on-success.
void check_checkpoint_schedule(const po::variables_map& values, const GeneralOptions& general,
                               RunOptions& run) {
  if (values.count("keep-last")) {
    run.retention.keep_last = general.keep_last;
  }
  if (values.count("keep-every")) {
    run.retention.keep_every = general.keep_every;
  }
  validate(run.retention);
  if (values.count("mtbf")) {
    if (!(std::isfinite(general.mtbf) && general.mtbf > 0 && general.mtbf <= 1e9)) {
      throw UsageError("--mtbf must be a number of hours more than 0 and at most 1e9, got " +
                       shown(general.mtbf));
    }
    run.mtbf_seconds = general.mtbf * 3600;
  }
  if (values.count("checkpoint-every")) {
    const auto& every = general.checkpoint_every;
    if (every == "auto") {
      if (!run.mtbf_seconds) {
        throw UsageError(
            "--checkpoint-every auto needs --mtbf HOURS (the failure rate it chooses for)");
      }
      run.checkpoint_every_auto = true;
    } else {
      const bool whole =
          !every.empty() && every.size() <= 18 &&
          every.find_first_not_of("0123456789", every[0] == '-' ? 1 : 0) == std::string::npos &&
          every != "-";
      if (!whole) {
        throw UsageError("--checkpoint-every must be a whole number of at least 1 or auto, got '" +
                         every + "'");
      }
      run.checkpoint_policy.every = std::stoll(every);
    }
  }
  if (values.count("checkpoint-interval") && general.checkpoint_interval != 0) {
    run.checkpoint_policy.interval_seconds = general.checkpoint_interval;
  }
  validate(run.checkpoint_policy);
  run.delete_checkpoints_on_success = general.delete_on_success;
}

// The node-local levels: --flush-every, --flush-interval, --local-keep, --local-redundancy (each
// needs --local-dir).
void check_levels(const po::variables_map& values, const GeneralOptions& general, RunOptions& run) {
  for (const char* option : {"flush-every", "flush-interval", "local-keep", "local-redundancy"}) {
    if (values.count(option) && !values.count("local-dir")) {
      throw UsageError(std::string("--") + option +
                       " needs --local-dir (the node-local directory the checkpoints that are "
                       "not flushed are kept in)");
    }
  }
  // A count of checkpoints, from 1 to a billion.
  const auto count = [](const char* option, std::int64_t value) {
    if (value < 1 || value > 1'000'000'000) {
      throw UsageError(std::string("--") + option +
                       " must be a whole number from 1 to 1000000000, got " +
                       std::to_string(value));
    }
    return value;
  };
  if (values.count("flush-every")) {
    run.flush_every = count("flush-every", general.flush_every);
  }
  if (values.count("flush-interval")) {
    if (!(std::isfinite(general.flush_interval) && general.flush_interval > 0 &&
          general.flush_interval <= 1e9)) {
      throw UsageError(
          "--flush-interval must be a number of seconds more than 0 and at most 1e9, got " +
          shown(general.flush_interval));
    }
    run.flush_interval_seconds = general.flush_interval;
    if (!values.count("flush-every")) {
      run.flush_every = 0;  // by time alone
    }
  }
  if (values.count("local-keep")) {
    run.local_keep = count("local-keep", general.local_keep);
  }
  if (values.count("local-redundancy")) {
    run.local_redundancy = local_redundancy_name(parse_local_redundancy(general.local_redundancy));
  }
}

// How checkpoints are written: --async-checkpoint, --async-max-staging-mib, --local-dir,
// --no-directory-lock, --array-io, --mpi-io-hint, --check-replicated.
void check_checkpoint_writing(const po::variables_map& values, const GeneralOptions& general,
                              RunOptions& run) {
  run.async_checkpoint = general.async_checkpoint;
  if (values.count("async-max-staging-mib")) {
    if (!general.async_checkpoint) {
      throw UsageError("--async-max-staging-mib needs --async-checkpoint");
    }
    if (general.async_max_staging_mib > (std::uint64_t(1) << 44)) {
      throw UsageError("--async-max-staging-mib must be at most 2^44, got " +
                       std::to_string(general.async_max_staging_mib));
    }
    run.async_max_staging_bytes = general.async_max_staging_mib << 20;
  }
  if (values.count("local-dir")) {
    // Whether each rank can write there is for the run to find out on every host; a path that
    // is plainly no node-local one is refused here.
    const std::filesystem::path local(general.local_dir);
    if (local.empty()) {
      throw UsageError("--local-dir must not be empty");
    }
    if ((local / "").lexically_normal() ==
        (std::filesystem::path(general.checkpoint_dir) / "").lexically_normal()) {
      throw UsageError("--local-dir '" + general.local_dir +
                       "' is the checkpoint directory itself: give a node-local directory");
    }
    run.local_dir = local;
  }
  check_levels(values, general, run);
  if (values.count("xdmf")) {
    if (general.xdmf.empty()) {
      throw UsageError("--xdmf needs a file name");
    }
    run.xdmf_file = general.xdmf;
  }
  run.directory_lock = !values["no-directory-lock"].as<bool>();
  const auto array_io = parse_array_io(general.array_io);
  if (!array_io) {
    throw UsageError("--array-io must be auto, direct or mpiio, got '" + general.array_io + "'");
  }
  run.array_io = *array_io;
  for (const auto& hint : general.mpi_io_hints) {
    const auto equals = hint.find('=');
    const auto key = hint.substr(0, equals);
    if (equals == std::string::npos || key.empty() || equals + 1 == hint.size() ||
        key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      throw UsageError(
          "--mpi-io-hint takes KEY=VALUE (a hint name of lowercase letters, digits "
          "and '_'), got '" +
          hint + "'");
    }
    run.mpi_io_hints[key] = hint.substr(equals + 1);
  }
  run.check_replicated = general.check_replicated;
}

// Each --allow-config-change must name an option of the job.
void check_allowed_config_changes(const GeneralOptions& general, const std::string& job,
                                  const po::options_description& job_description) {
  for (const auto& key : general.allow_config_change) {
    if (key.rfind(job + ".", 0) != 0 || job_description.find_nothrow(key, false) == nullptr) {
      throw UsageError("--allow-config-change '" + key + "' is not an option of job " + job +
                       " (e.g. " + job + ".<key>; 'epochrun run --job " + job +
                       " --help' lists them)");
    }
  }
}

// --time-budget and --time-margin.
void check_time_limit(const po::variables_map& values, const GeneralOptions& general,
                      RunOptions& run) {
  if (values.count("time-budget")) {
    require_seconds(general.time_budget, "--time-budget", false);
    run.time_budget_seconds = general.time_budget;
  }
  if (values.count("time-margin")) {
    require_seconds(general.time_margin, "--time-margin", true);
    run.time_margin_seconds = general.time_margin;
  }
}

}  // namespace

std::string because(const std::error_code& error) {
  return error ? " (" + error.message() + ")" : "";
}

// The checks run in this order, which decides the error reported when several options are
// wrong.
RunOptions checked_run_options(const po::variables_map& values, const GeneralOptions& general,
                               const std::string& job,
                               const po::options_description& job_description) {
  RunOptions run;
  if (general.job != job) {
    throw UsageError("the config file names job '" + general.job + "' but --job is '" + job + "'");
  }
  check_checkpoint_location(values, general, run);
  check_span_and_outputs(values, general, run);
  check_checkpoint_schedule(values, general, run);
  check_checkpoint_writing(values, general, run);
  run.task_failure_timeout = timeout_option("--task-failure-timeout", general.task_failure_timeout);
  run.save_timeout = timeout_option("--save-timeout", general.save_timeout);
  run.preempt_signals = parse_preemption_signals(general.preempt_signals);
  check_allowed_config_changes(general, job, job_description);
  run.allowed_config_changes = general.allow_config_change;
  check_time_limit(values, general, run);
  return run;
}

}  // namespace epochrun::cli
