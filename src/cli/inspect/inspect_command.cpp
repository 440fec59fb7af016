// `epochrun inspect PATH`: a checkpoint directory or one checkpoint file, seen as a user of
// h5ls, h5dump and h5diff expects. A summary line per checkpoint by default; --blobs the blob
// tree; --show one blob's values; --diff what changed between two epochs; --export .npy files;
// --verify every blob read back against its checksum; --xdmf an XDMF file of the global arrays of
// every epoch, for ParaView and VisIt. Version 3's replicated blobs and global
// arrays (whole, in their global shape) appear beside the nodes' blobs in each of these. Needs no
// MPI, and reads only through CheckpointReader and CheckpointDirectory, so it reads every format
// version they read.
#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command_line.hpp"
#include "epochrun/epochrun.hpp"
#include "inspect/blob_values.hpp"
#include "inspect/checkpoint_diff.hpp"
#include "inspect/checkpoint_export.hpp"
#include "inspect/inspect_listing.hpp"
#include "inspect/inspect_source.hpp"
#include "inspect/local_epochs_listing.hpp"
#include "inspect/xdmf_export.hpp"
#include "json_text.hpp"
#include "report/run_history_report.hpp"
#include "run_history_file.hpp"
#include "run_history_json.hpp"
#include "subcommand_options.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;

struct InspectOptions {
  std::string path;
  std::string epoch;  // empty: every checkpoint (listing) or the latest (show, export)
  ListingOptions listing;
  std::string show;               // NODE/BLOB
  bool full = false;              // --show: every value
  std::vector<std::string> diff;  // two epochs
  std::string export_directory;
  std::string xdmf;
  bool json = false;
};

constexpr const char* kCaption =
    "epochrun inspect DIR|FILE [options]: the committed checkpoints of a directory, or one file";

std::optional<InspectOptions> parse_inspect_options(int argc, char** argv) {
  InspectOptions o;
  po::options_description options(kCaption);
  options.add_options()("help,h", "print this help")(
      "epoch", po::value(&o.epoch),
      "N|latest: only this checkpoint of the directory (--show and --export: the latest by "
      "default)")("blobs", po::bool_switch(&o.listing.blobs),
                  "every node's blobs: dtype, shape, bytes, xxh64")(
      "verify", po::bool_switch(&o.listing.verify),
      "read every blob back and check its checksum; exit 3 when a checkpoint is damaged")(
      "show", po::value(&o.show),
      "NODE/BLOB (or replicated/BLOB, arrays/ARRAY): print the blob's values (long arrays "
      "summarized)")("full", po::bool_switch(&o.full), "with --show: every value")(
      "diff", po::value(&o.diff)->multitoken(),
      "A B: the blobs added, removed or changed (dtype, shape, checksum) from epoch A to B")(
      "export", po::value(&o.export_directory),
      "DIR: write every blob of the checkpoint as DIR/NODE/BLOB.npy (DIR new or empty); "
      "replicated blobs as DIR/replicated/BLOB.npy, global arrays whole as "
      "DIR/arrays/ARRAY.npy")(
      "xdmf", po::value(&o.xdmf),
      "OUT.xmf: write one XDMF file describing every committed checkpoint's global arrays as a "
      "time series (ParaView, VisIt), pointing into the checkpoint files")(
      "json", po::bool_switch(&o.json), "print JSON")("path", po::value(&o.path),
                                                      "checkpoint directory or file");
  po::positional_options_description positional;
  positional.add("path", 1);
  const auto values = parse_subcommand(argc, argv, options, positional);
  if (!values) {
    return std::nullopt;
  }
  if (o.path.empty()) {
    throw UsageError("inspect needs a checkpoint directory or file: epochrun inspect DIR|FILE");
  }
  const int modes = int{!o.show.empty()} + int{values->count("diff") > 0} +
                    int{!o.export_directory.empty()} + int{values->count("xdmf") > 0};
  if (modes > 1) {
    throw UsageError("--show, --diff, --export and --xdmf are separate: give one of them");
  }
  if (modes == 1 && (o.listing.blobs || o.listing.verify)) {
    throw UsageError(
        "--blobs and --verify list checkpoints; they do not go with --show, --diff, "
        "--export or --xdmf");
  }
  if (values->count("xdmf") && o.xdmf.empty()) {
    throw UsageError("--xdmf needs a file name: --xdmf OUT.xmf");
  }
  if (o.full && o.show.empty()) {
    throw UsageError("--full goes with --show");
  }
  if (values->count("diff") && o.diff.size() != 2) {
    throw UsageError("--diff takes two epochs (N or latest): --diff A B");
  }
  if (values->count("diff") && !o.epoch.empty()) {
    throw UsageError("--diff names its two epochs itself; leave out --epoch");
  }
  if (values->count("show") && std::count(o.show.begin(), o.show.end(), '/') != 1) {
    throw UsageError("--show takes NODE/BLOB, e.g. trainer_0/weights, got '" + o.show + "'");
  }
  return o;
}

void print(const nlohmann::json& json) {
  std::cout << json_text(json, 2) << "\n";
}

int list(const InspectSource& source, const InspectOptions& options) {
  const auto choices =
      options.epoch.empty() ? source.all() : std::vector{source.choose(options.epoch)};
  auto entries = nlohmann::json::array();
  bool all_valid = true;
  for (const auto& choice : choices) {
    if (auto entry = describe_checkpoint(choice, options.listing)) {
      all_valid = all_valid && (*entry)["valid"].get<bool>();
      entries.push_back(std::move(*entry));
    }
  }
  const auto history =
      source.is_file() ? std::vector<RunRecord>{} : read_run_history(source.path());
  const auto node_local = source.is_file() || !options.epoch.empty()
                              ? nlohmann::json::array()
                              : describe_local_epochs(source.path());
  if (options.json) {
    print({{source.is_file() ? "file" : "directory", source.path().string()},
           {"checkpoints", entries},
           {"node_local_epochs", node_local},
           {"history", history}});
  } else {
    if (!source.is_file()) {
      std::cout << "committed checkpoints in " << source.path().string() << ": " << entries.size()
                << "\n";
    }
    print_checkpoints(std::cout, entries, options.listing);
    print_local_epochs(std::cout, source.path(), node_local);
    if (!source.is_file()) {
      print_run_history(std::cout, history);
    }
  }
  return exit_status(all_valid ? ExitCode::kSuccess : ExitCode::kCheckpointError);
}

int show(const InspectSource& source, const InspectOptions& options) {
  const auto choice = source.choose(options.epoch);
  const auto reader = open_checkpoint(choice);
  const auto slash = options.show.find('/');
  const auto node = options.show.substr(0, slash);
  const auto name = options.show.substr(slash + 1);
  const auto& header = reader.header();
  // Version 3's blobs stored once are named by their group, unless a node has that name.
  const bool shared = !header.blobs.contains(node) && header.format_version >= 3;
  const auto blob = shared && node == "replicated" ? reader.read_replicated(name)
                    : shared && node == "arrays"   ? reader.read_array(name)
                                                   : reader.read_blob(node, name);
  if (options.json) {
    auto json = values_json(blob, options.full);
    json.update({{"epoch", header.epoch},
                 {"file", choice.file.string()},
                 {"blob", options.show},
                 {"dtype", dtype_name(blob.dtype())},
                 {"shape", blob.shape()},
                 {"bytes", blob.byte_size()}});
    print(json);
    return exit_status(ExitCode::kSuccess);
  }
  std::cout << options.show << "  " << dtype_name(blob.dtype()) << shape_to_string(blob.shape())
            << "  " << blob.byte_size() << " bytes  (epoch " << header.epoch << ", "
            << choice.file.string() << ")\n"
            << (blob.dtype() == DType::kBytes ? format_hex(blob, options.full)
                                              : format_values(blob, options.full) + "\n");
  return exit_status(ExitCode::kSuccess);
}

int diff(const InspectSource& source, const InspectOptions& options) {
  if (source.is_file()) {
    throw UsageError("--diff compares two epochs of a checkpoint directory; '" +
                     source.path().string() + "' is one file");
  }
  const auto from = open_checkpoint(source.choose(options.diff[0]));
  const auto to = open_checkpoint(source.choose(options.diff[1]));
  // Arrays written in other blocks are compared by their values, read whole from both files.
  const auto differences = diff_checkpoints(
      from.header(), to.header(), [&](const GlobalArrayRecord& a, const GlobalArrayRecord& b) {
        const auto before = from.read_array(a.name);
        const auto after = to.read_array(b.name);
        return std::equal(before.raw().begin(), before.raw().end(), after.raw().begin(),
                          after.raw().end());
      });
  if (options.json) {
    print(differences);
  } else {
    print_diff(std::cout, differences);
  }
  return exit_status(ExitCode::kSuccess);
}

int export_blobs(const InspectSource& source, const InspectOptions& options) {
  const auto choice = source.choose(options.epoch);
  const auto reader = open_checkpoint(choice);
  const auto files = export_checkpoint(reader, options.export_directory);
  if (options.json) {
    print({{"epoch", reader.header().epoch},
           {"file", choice.file.string()},
           {"directory", options.export_directory},
           {"files", files}});
  } else {
    std::cout << "exported " << files.size() << " blobs of epoch " << reader.header().epoch << " ("
              << choice.file.string() << ") to " << options.export_directory << "\n";
  }
  return exit_status(ExitCode::kSuccess);
}

int write_xdmf(const InspectSource& source, const InspectOptions& options) {
  if (!options.epoch.empty()) {
    throw UsageError("--xdmf describes every committed epoch; leave out --epoch");
  }
  const auto written = export_xdmf(source, options.xdmf);
  if (options.json) {
    print(written);
  } else {
    std::cout << "wrote " << options.xdmf << ": " << written["epochs"].size() << " epochs, "
              << written["arrays"] << " global arrays\n";
    for (const auto& skipped : written["skipped"]) {
      std::cout << "left out epoch " << skipped["epoch"].dump() << ": "
                << skipped["error"].get<std::string>() << "\n";
    }
  }
  return exit_status(written["skipped"].empty() ? ExitCode::kSuccess : ExitCode::kCheckpointError);
}

}  // namespace

int inspect_command(int argc, char** argv) {
  try {
    const auto options = parse_inspect_options(argc, argv);
    if (!options) {
      return exit_status(ExitCode::kSuccess);
    }
    const InspectSource source(options->path);
    if (!options->show.empty()) {
      return show(source, *options);
    }
    if (!options->diff.empty()) {
      return diff(source, *options);
    }
    if (!options->export_directory.empty()) {
      return export_blobs(source, *options);
    }
    if (!options->xdmf.empty()) {
      return write_xdmf(source, *options);
    }
    return list(source, *options);
  } catch (const std::exception& error) {
    return report_failure(error);
  }
}

int list_jobs_command(int argc, char** argv) {
  (void)argv;
  if (argc > 1) {
    return fail_before_mpi("list-jobs takes no arguments", ExitCode::kUsageError);
  }
  for (const auto* entry : JobRegistry::instance().all()) {
    std::cout << entry->name << "  " << entry->summary << "\n";
  }
  return exit_status(ExitCode::kSuccess);
}

}  // namespace epochrun::cli
