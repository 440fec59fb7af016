// `epochrun inspect DIR`: the committed checkpoints, their nodes and blobs; with --verify,
// every blob is read back and checked against its checksum. Needs no MPI. A checkpoint deleted
// while inspect runs (retention of a running job) is left out, not reported as damaged.
#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command_line.hpp"
#include "cli/run_history_report.hpp"
#include "epochrun/epochrun.hpp"
#include "json_text.hpp"
#include "run_history_json.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;

// The entry of one committed checkpoint; nullopt when it is gone (retention of a running job
// may delete it between the listing and the reading: that is not damage).
std::optional<nlohmann::json> describe_epoch(const CheckpointDirectory& directory,
                                             std::int64_t epoch, bool verify) {
  const auto file = directory.file_for(epoch);
  nlohmann::json entry = {{"epoch", epoch}, {"file", file.filename().string()}};
  try {
    // The reader keeps the file open: once it is open, a deletion cannot take it away.
    CheckpointReader reader(file);
    const auto& header = reader.header();
    entry["bytes"] = reader.file_bytes();
    entry["job"] = header.job;
    entry["num_ranks"] = header.num_ranks();
    entry["format_version"] = header.format_version;
    if (header.epoch != epoch) {
      throw CorruptCheckpoint("checkpoint " + file.string() + " records epoch " +
                              std::to_string(header.epoch));
    }
    auto nodes = nlohmann::json::object();
    for (const auto& node : header.node_names) {
      auto blobs = nlohmann::json::array();
      for (const auto& record : header.blobs.at(node)) {
        blobs.push_back({{"name", record.name},
                         {"dtype", dtype_name(record.dtype)},
                         {"shape", record.shape},
                         {"bytes", record.byte_size()}});
        if (verify) {
          (void)reader.read_blob(node, record.name);
        }
      }
      nodes[node] = blobs;
    }
    entry["nodes"] = nodes;
    entry["valid"] = true;
  } catch (const CheckpointNotFound&) {
    return std::nullopt;
  } catch (const std::exception& error) {
    if (!entry.contains("bytes")) {
      struct stat status {};
      if (::lstat(file.c_str(), &status) != 0) {
        return std::nullopt;  // deleted while it was being opened
      }
      entry["bytes"] = static_cast<std::uint64_t>(status.st_size);
    }
    entry["valid"] = false;
    entry["error"] = error.what();
  }
  return entry;
}

void print_text(const std::filesystem::path& directory, const nlohmann::json& epochs) {
  std::cout << "committed checkpoints in " << directory.string() << ": " << epochs.size() << "\n";
  for (const auto& entry : epochs) {
    std::cout << "epoch " << entry["epoch"] << "  " << entry["file"].get<std::string>() << "  "
              << entry["bytes"] << " bytes";
    if (!entry["valid"].get<bool>()) {
      std::cout << "  CORRUPT: " << entry["error"].get<std::string>() << "\n";
      continue;
    }
    std::cout << "  job " << entry["job"].get<std::string>() << "  " << entry["num_ranks"]
              << " ranks\n";
    for (const auto& [node, blobs] : entry["nodes"].items()) {
      std::cout << "  " << node << ":";
      for (const auto& blob : blobs) {
        std::cout << " " << blob["name"].get<std::string>() << " "
                  << blob["dtype"].get<std::string>()
                  << shape_to_string(blob["shape"].get<Shape>());
      }
      std::cout << "\n";
    }
  }
}

}  // namespace

int inspect_command(int argc, char** argv) {
  std::string directory_name;
  bool json = false;
  bool verify = false;
  po::options_description options("epochrun inspect DIR [options]");
  options.add_options()("help,h", "print this help")("json", po::bool_switch(&json), "print JSON")(
      "verify", po::bool_switch(&verify), "read every blob and check its checksum")(
      "dir", po::value(&directory_name), "checkpoint directory");
  po::positional_options_description positional;
  positional.add("dir", 1);
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(),
              values);
    po::notify(values);
    if (values.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    if (directory_name.empty()) {
      throw UsageError("inspect needs a checkpoint directory: epochrun inspect DIR");
    }
    std::error_code error;  // a symlink loop, for one, is the user's to fix: a usage error
    if (!std::filesystem::is_directory(directory_name, error)) {
      throw UsageError("'" + directory_name + "' is not a directory" +
                       (error ? " (" + error.message() + ")" : ""));
    }
  } catch (const std::exception& error) {
    return report_failure(error);
  }

  CheckpointDirectory directory(directory_name);
  auto epochs = nlohmann::json::array();
  bool all_valid = true;
  for (auto epoch : directory.committed_epochs()) {
    if (auto entry = describe_epoch(directory, epoch, verify)) {
      all_valid = all_valid && (*entry)["valid"].get<bool>();
      epochs.push_back(std::move(*entry));
    }
  }
  const auto history = read_run_history(directory_name);
  if (json) {
    std::cout << json_text(nlohmann::json{{"directory", directory_name},
                                          {"checkpoints", epochs},
                                          {"history", history}},
                           2)
              << "\n";
  } else {
    print_text(directory_name, epochs);
    print_run_history(std::cout, history);
  }
  return static_cast<int>(all_valid ? ExitCode::kSuccess : ExitCode::kCheckpointError);
}

int list_jobs_command(int argc, char** argv) {
  (void)argv;
  if (argc > 1) {
    return fail_before_mpi("list-jobs takes no arguments", static_cast<int>(ExitCode::kUsageError));
  }
  for (const auto* entry : JobRegistry::instance().all()) {
    std::cout << entry->name << "  " << entry->summary << "\n";
  }
  return 0;
}

}  // namespace epochrun::cli
