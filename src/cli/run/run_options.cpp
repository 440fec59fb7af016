#include "run/run_options.hpp"

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <typeinfo>

#include "epochrun/errors.hpp"
#include "epochrun/logging.hpp"
#include "json_text.hpp"
#include "run/run_config_record.hpp"
#include "run/run_option_checks.hpp"
#include "run/run_option_descriptions.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;

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

// What the first pass finds: whether help is asked, the config file, and the job.
struct FirstPass {
  bool help = false;
  std::string config;
  std::string job;  // empty: none given
};

// Pass 1, lenient: which job, which config file. Job options are unknown until the job is.
FirstPass first_pass(int argc, char** argv, const po::options_description& general_description) {
  po::variables_map first;
  po::store(
      po::command_line_parser(argc, argv).options(general_description).allow_unregistered().run(),
      first);
  FirstPass found;
  found.help = first.count("help") > 0;
  found.config = first.count("config") ? first["config"].as<std::string>() : "";
  found.job = first.count("job") ? first["job"].as<std::string>() : "";
  if (found.job.empty() && !found.config.empty()) {
    auto in = open_config(found.config);
    po::variables_map from_file;
    po::store(po::parse_config_file(in, general_description, true), from_file);
    found.job = from_file.count("job") ? from_file["job"].as<std::string>() : "";
  }
  return found;
}

// The registration of job `job`; UsageError listing the known jobs when there is none.
const JobRegistration& registered_job(const std::string& job) {
  const auto* registration = JobRegistry::instance().find(job);
  if (registration == nullptr) {
    std::string known;
    for (const auto* entry : JobRegistry::instance().all()) {
      known += (known.empty() ? "" : ", ") + entry->name;
    }
    throw UsageError("unknown job '" + job + "' (known jobs: " + known + ")");
  }
  return *registration;
}

// Pass 2, strict, with the job's options: the command line first, so that it wins over the
// file (`config`, unless empty).
po::variables_map second_pass(int argc, char** argv, const po::options_description& all,
                              const std::string& config) {
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
  return values;
}

}  // namespace

// Returns nullopt when help was printed.
std::optional<Invocation> parse_run_options(int argc, char** argv) {
  Invocation invocation;
  auto& general = invocation.general;
  auto general_description = general_options(general);
  const auto first = first_pass(argc, argv, general_description);
  if (first.job.empty()) {
    if (first.help) {
      std::cout << "usage: epochrun run --job NAME [options]\n\n" << general_description << "\n";
      return std::nullopt;
    }
    throw UsageError("no job given: pass --job NAME (see 'epochrun list-jobs')");
  }
  const auto& job = first.job;
  invocation.make_job = registered_job(job).declare(invocation.job_options);
  const auto job_description = job_options_description(invocation.job_options, job);
  po::options_description all;
  all.add(general_description).add(job_description);
  if (first.help) {
    std::cout << "usage: epochrun run --job " << job << " [options]\n\n" << all << "\n";
    return std::nullopt;
  }
  const auto values = second_pass(argc, argv, all, first.config);
  invocation.run_options = checked_run_options(values, general, job, job_description);
  invocation.log_level = parse_log_level(general.log_level);
  invocation.run_options.config_json = json_text(config_to_json(values));
  // Builds once here so that an inconsistent job option is a usage error before MPI starts.
  (void)invocation.make_job();
  return invocation;
}

}  // namespace epochrun::cli
