#include "run/run_options.hpp"

#include <boost/any.hpp>
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>
#include <typeinfo>
#include <variant>

#include "epochrun/errors.hpp"
#include "epochrun/logging.hpp"
#include "json_text.hpp"
#include "preemption_signals.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;

po::options_description general_options(GeneralOptions& o) {
  po::options_description options(
      "epochrun run options (also valid as INI keys; the command line wins)");
  options.add_options()("help,h", "print this help (with --job: also the job's options)")(
      "job", po::value(&o.job), "the job to run (see 'epochrun list-jobs')")(
      "config", po::value(&o.config),
      "INI file with any of these options; job options go in a [<job>] section")(
      "checkpoint-dir", po::value(&o.checkpoint_dir)->default_value(o.checkpoint_dir),
      "directory of the checkpoints (created when missing)")(
      "async-checkpoint", po::bool_switch(&o.async_checkpoint),
      "write each checkpoint in the background while the next epoch runs (the state is copied "
      "at the epoch's end; the last checkpoint and one at a stop are synchronous)")(
      "async-max-staging-mib", po::value(&o.async_max_staging_mib),
      "with --async-checkpoint: a checkpoint whose copy would exceed M MiB on any rank is saved "
      "synchronously instead (default: no limit)")(
      "no-checkpoints", po::bool_switch(&o.no_checkpoints),
      "run without saving anything: no checkpoint, no directory, no lock (for comparisons)")(
      "resume-from-epoch", po::value(&o.resume),
      "N: load epoch N and continue at N+1; latest: the newest committed epoch, or from scratch "
      "when there is none")("num-epochs", po::value(&o.num_epochs),
                            "stop after this epoch number at the latest")(
      "upload-dir", po::value(&o.upload_dir),
      "copy the final committed checkpoint to this directory (or file://DIR)")(
      "summary-json", po::value(&o.summary_json), "write a JSON summary of the run to this file")(
      "log-level", po::value(&o.log_level)->default_value(o.log_level),
      "trace, debug, info, warn, error or off")(
      "keep-last", po::value(&o.keep_last),
      "keep only the K newest checkpoints (older ones go once a newer one is committed)")(
      "keep-every", po::value(&o.keep_every), "also keep every epoch divisible by N as a snapshot")(
      "checkpoint-every", po::value(&o.checkpoint_every),
      "checkpoint every Nth epoch (default 1; with only --checkpoint-interval: by time alone); "
      "init, the last epoch and a preemption or time-limit stop are always checkpointed")(
      "checkpoint-interval", po::value(&o.checkpoint_interval),
      "also checkpoint an epoch ending S seconds or more after the last committed checkpoint "
      "(0: off)")("delete-checkpoints-on-success", po::bool_switch(&o.delete_on_success),
                  "delete the checkpoints once the exit group has succeeded (backup-and-restore)")(
      "task-failure-timeout",
      po::value(&o.task_failure_timeout)->default_value(o.task_failure_timeout),
      "seconds a rank whose task failed waits for the other ranks to hear of it before it aborts "
      "the whole job (exit 1): they may be blocked in a collective call of the job")(
      "no-directory-lock", po::bool_switch(),
      "run without the checkpoint directory lock (for file systems without flock): no other run "
      "may use the directory meanwhile")(
      "save-timeout", po::value(&o.save_timeout)->default_value(o.save_timeout),
      "seconds a rank waits for the other ranks at each step of a save or a load before it "
      "aborts the whole job (exit 1): a rank that takes longer is stuck")(
      "preempt-signals", po::value(&o.preempt_signals)->default_value(o.preempt_signals),
      "signals that stop the run after the epoch in progress with a checkpoint and exit code 75 "
      "(names without SIG, comma-separated; none: no signal is caught)")(
      "allow-config-change", po::value(&o.allow_config_change)->composing(),
      "resume although this run-defining job option (e.g. sgd_regression.seed) differs from the "
      "checkpoint's (repeatable)")(
      "time-budget", po::value(&o.time_budget),
      "seconds from the program start this run may take: it stops with a checkpoint and exit "
      "code 75 when the next epoch would not fit (under SLURM the job's end time also counts)")(
      "time-margin", po::value(&o.time_margin),
      "seconds to keep free before the time limit (default 60 under SLURM, 0 otherwise)");
  return options;
}

// With --no-checkpoints, an option about checkpoints is a contradiction: UsageError naming it.
void refuse_with_no_checkpoints(const po::variables_map& values) {
  for (const char* option : {"checkpoint-dir", "resume-from-epoch", "upload-dir", "keep-last",
                             "keep-every", "checkpoint-every", "checkpoint-interval",
                             "delete-checkpoints-on-success", "no-directory-lock"}) {
    const auto found = values.find(option);
    // A switch set to false in the INI file is no contradiction.
    const bool given = found != values.end() && !found->second.defaulted() &&
                       !(found->second.value().type() == typeid(bool) && !found->second.as<bool>());
    if (given) {
      throw UsageError(std::string("--no-checkpoints cannot be combined with --") + option);
    }
  }
}

// A timeout in seconds: more than 0 and at most a day. UsageError otherwise.
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

std::chrono::duration<double> timeout_option(const std::string& flag, double seconds) {
  if (!(seconds > 0 && seconds <= 86400)) {
    throw UsageError(flag + " must be more than 0 and at most 86400 seconds, got " +
                     shown(seconds));
  }
  return std::chrono::duration<double>(seconds);
}

// " (why)" for a failed file system query, to end a usage error's line; "" when it did not fail.
std::string because(const std::error_code& error) {
  return error ? " (" + error.message() + ")" : "";
}

std::ifstream open_config(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw UsageError("config file '" + path + "' does not exist or is not a regular file" +
                     because(error));
  }
  std::ifstream in(path);
  if (!in) {
    throw UsageError("config file '" + path + "' cannot be read");
  }
  return in;
}

bool is_unsigned(const std::type_info& type) {
  return type == typeid(unsigned char) || type == typeid(unsigned short) ||
         type == typeid(unsigned int) || type == typeid(unsigned long) ||
         type == typeid(unsigned long long);
}

// Boost reads "-1" into an unsigned option as 2^64 - 1 (lexical_cast wraps around), so a
// negative value is refused here for every unsigned option of every job, from either source.
void refuse_negative_unsigned_values(const po::parsed_options& parsed) {
  for (const auto& option : parsed.options) {
    const auto* description = parsed.description->find_nothrow(option.string_key, false);
    const auto* typed =
        description == nullptr
            ? nullptr
            : dynamic_cast<const po::typed_value_base*>(description->semantic().get());
    if (typed == nullptr || !is_unsigned(typed->value_type())) {
      continue;
    }
    for (const auto& value : option.value) {
      const auto first = value.find_first_not_of(" \t");
      if (first != std::string::npos && value[first] == '-') {
        throw UsageError("--" + option.string_key + " must not be negative, got '" + value + "'");
      }
    }
  }
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

// The job's declared options as Boost options named `prefix` + key, each writing into the
// variable it is bound to, with that variable's value as the default.
po::options_description job_options_description(const JobOptions& declared,
                                                const std::string& job) {
  po::options_description description("options of job " + job + " (INI section [" + job + "])");
  for (const auto& option : declared.all()) {
    const auto name = job + "." + option.key;
    std::visit(
        [&](auto* target) {
          auto* value = po::value(target);
          if constexpr (std::is_same_v<decltype(target), bool*>) {
            value->default_value(*target, *target ? "true" : "false");
          } else {
            value->default_value(*target);
          }
          description.add_options()(name.c_str(), value, option.help.c_str());
        },
        option.target);
  }
  return description;
}

// The effective configuration, as recorded in every checkpoint.
nlohmann::json config_to_json(const po::variables_map& values) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, entry] : values) {
    if (key == "help") {
      continue;
    }
    const auto& value = entry.value();
    if (const auto* text = boost::any_cast<std::string>(&value)) {
      json[key] = *text;
    } else if (const auto* signed_number = boost::any_cast<std::int64_t>(&value)) {
      json[key] = *signed_number;
    } else if (const auto* unsigned_number = boost::any_cast<std::uint64_t>(&value)) {
      json[key] = *unsigned_number;
    } else if (const auto* real = boost::any_cast<double>(&value)) {
      json[key] = *real;
    } else if (const auto* flag = boost::any_cast<bool>(&value)) {
      json[key] = *flag;
    }
  }
  return json;
}

}  // namespace

// Returns nullopt when help was printed.
std::optional<Invocation> parse_run_options(int argc, char** argv) {
  Invocation invocation;
  auto& general = invocation.general;
  auto general_description = general_options(general);

  // Pass 1: which job, which config file. Job options are unknown until the job is.
  po::variables_map first;
  po::store(
      po::command_line_parser(argc, argv).options(general_description).allow_unregistered().run(),
      first);
  const bool help = first.count("help") > 0;
  const std::string config = first.count("config") ? first["config"].as<std::string>() : "";
  std::string job = first.count("job") ? first["job"].as<std::string>() : "";
  if (job.empty() && !config.empty()) {
    auto in = open_config(config);
    po::variables_map from_file;
    po::store(po::parse_config_file(in, general_description, true), from_file);
    job = from_file.count("job") ? from_file["job"].as<std::string>() : "";
  }
  if (job.empty()) {
    if (help) {
      std::cout << "usage: epochrun run --job NAME [options]\n\n" << general_description << "\n";
      return std::nullopt;
    }
    throw UsageError("no job given: pass --job NAME (see 'epochrun list-jobs')");
  }
  const auto* registration = JobRegistry::instance().find(job);
  if (registration == nullptr) {
    std::string known;
    for (const auto* entry : JobRegistry::instance().all()) {
      known += (known.empty() ? "" : ", ") + entry->name;
    }
    throw UsageError("unknown job '" + job + "' (known jobs: " + known + ")");
  }
  invocation.make_job = registration->declare(invocation.job_options);
  const auto job_description = job_options_description(invocation.job_options, job);
  po::options_description all;
  all.add(general_description).add(job_description);
  if (help) {
    std::cout << "usage: epochrun run --job " << job << " [options]\n\n" << all << "\n";
    return std::nullopt;
  }

  // Pass 2, strict: the command line first, so that it wins over the file.
  po::variables_map values;
  auto parsed = po::command_line_parser(argc, argv).options(all).run();
  // Boost keeps positional words aside silently; `run` takes none, so a stray word is a typo.
  for (const auto& stray : po::collect_unrecognized(parsed.options, po::include_positional)) {
    throw UsageError("unexpected argument '" + stray + "'");
  }
  refuse_negative_unsigned_values(parsed);
  po::store(parsed, values);
  if (!config.empty()) {
    auto in = open_config(config);
    auto from_file = po::parse_config_file(in, all, false);
    refuse_negative_unsigned_values(from_file);
    po::store(from_file, values);
  }
  po::notify(values);

  auto& run = invocation.run_options;
  if (general.job != job) {
    throw UsageError("the config file names job '" + general.job + "' but --job is '" + job + "'");
  }
  if (general.no_checkpoints) {
    refuse_with_no_checkpoints(values);
  } else {
    if (general.checkpoint_dir.empty()) {
      throw UsageError("--checkpoint-dir must not be empty");
    }
    check_checkpoint_directory(general.checkpoint_dir);
    run.checkpoint_dir = general.checkpoint_dir;
  }
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
    auto parent = std::filesystem::path(general.summary_json).parent_path();
    std::error_code file_error, parent_error;
    if (general.summary_json.empty() ||
        std::filesystem::is_directory(general.summary_json, file_error) ||
        (!parent.empty() && !std::filesystem::is_directory(parent, parent_error))) {
      throw UsageError("--summary-json '" + general.summary_json +
                       "' must name a file in an existing directory" + because(parent_error));
    }
  }
  if (values.count("keep-last")) {
    run.retention.keep_last = general.keep_last;
  }
  if (values.count("keep-every")) {
    run.retention.keep_every = general.keep_every;
  }
  validate(run.retention);
  if (values.count("checkpoint-every")) {
    run.checkpoint_policy.every = general.checkpoint_every;
  }
  if (values.count("checkpoint-interval") && general.checkpoint_interval != 0) {
    run.checkpoint_policy.interval_seconds = general.checkpoint_interval;
  }
  validate(run.checkpoint_policy);
  run.delete_checkpoints_on_success = general.delete_on_success;
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
  run.directory_lock = !values["no-directory-lock"].as<bool>();
  run.task_failure_timeout = timeout_option("--task-failure-timeout", general.task_failure_timeout);
  run.save_timeout = timeout_option("--save-timeout", general.save_timeout);
  run.preempt_signals = parse_preemption_signals(general.preempt_signals);
  for (const auto& key : general.allow_config_change) {
    if (key.rfind(job + ".", 0) != 0 || job_description.find_nothrow(key, false) == nullptr) {
      throw UsageError("--allow-config-change '" + key + "' is not an option of job " + job +
                       " (e.g. " + job + ".<key>; 'epochrun run --job " + job +
                       " --help' lists them)");
    }
  }
  run.allowed_config_changes = general.allow_config_change;
  if (values.count("time-budget")) {
    require_seconds(general.time_budget, "--time-budget", false);
    run.time_budget_seconds = general.time_budget;
  }
  if (values.count("time-margin")) {
    require_seconds(general.time_margin, "--time-margin", true);
    run.time_margin_seconds = general.time_margin;
  }
  invocation.log_level = parse_log_level(general.log_level);
  run.config_json = json_text(config_to_json(values));
  // Builds once here so that an inconsistent job option is a usage error before MPI starts.
  (void)invocation.make_job();
  return invocation;
}

}  // namespace epochrun::cli
