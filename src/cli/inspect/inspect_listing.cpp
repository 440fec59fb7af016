#include "inspect/inspect_listing.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <functional>

#include "epochrun/checkpoint_file.hpp"
#include "inspect/global_array_entry.hpp"

namespace epochrun::cli {
namespace {

// What opening a file with CheckpointReader checks before any blob is read.
constexpr const char* kOpenChecks =
    "integrity header (its checksum, the file size, the metadata hash), every dataset's layout";

nlohmann::json blob_entry(const BlobRecord& record) {
  auto entry = record_json(record);
  entry["name"] = record.name;
  return entry;
}

// Reads every blob back and checks its xxh64, and records what does not verify, going on past
// a damaged blob so that one run names every damaged one. The reader's verifications keep no
// bytes: each value passes through one buffer, and a global array's dataset is read once for
// all of its writer blocks, so that the whole costs what reading and hashing the file costs.
nlohmann::json verify_blobs(const CheckpointReader& reader) {
  std::uint64_t checked = 0;
  std::uint64_t bytes = 0;
  auto problems = nlohmann::json::array();
  // `verify` reads and verifies, and returns the bytes it read.
  const auto check = [&](const std::string& name, const std::function<std::uint64_t()>& verify) {
    ++checked;
    try {
      bytes += verify();
    } catch (const std::exception& error) {
      problems.push_back({{"blob", name}, {"error", error.what()}});
    }
  };
  const auto& header = reader.header();
  for (const auto& [name_of_node, records] : header.blobs) {
    const std::string& node = name_of_node;  // a structured binding cannot be captured (C++20)
    for (const auto& record : records) {
      check(node + "/" + record.name, [&] { return reader.verify_blob(node, record.name); });
    }
  }
  for (const auto& record : header.replicated) {
    check("replicated/" + record.name, [&] { return reader.verify_replicated(record.name); });
  }
  for (const auto& array : header.arrays) {
    check("arrays/" + array.name, [&] { return reader.verify_array(array.name); });
  }
  return {{"checked", std::string(kOpenChecks) + ", every blob's xxh64"},
          {"blobs_checked", checked},
          {"blobs_intact", checked - problems.size()},
          {"bytes_read", bytes},
          {"problems", problems}};
}

// Version 3's replicated blobs and global arrays, counted and (--blobs) listed.
void describe_shared(const CheckpointHeader& header, const ListingOptions& options,
                     nlohmann::json& entry) {
  entry["num_per_node_blobs"] =
      entry["num_blobs"].get<std::uint64_t>() - header.replicated.size() - header.arrays.size();
  entry["num_replicated"] = header.replicated.size();
  entry["num_arrays"] = header.arrays.size();
  if (!options.blobs) {
    return;
  }
  auto replicated = nlohmann::json::array();
  for (const auto& record : header.replicated) {
    replicated.push_back(blob_entry(record));
  }
  auto arrays = nlohmann::json::array();
  for (const auto& array : header.arrays) {
    arrays.push_back(array_json(array));
  }
  entry["replicated"] = std::move(replicated);
  entry["arrays"] = std::move(arrays);
}

void describe_contents(const CheckpointReader& reader, const ListingOptions& options,
                       nlohmann::json& entry) {
  const auto& header = reader.header();
  entry["job"] = header.job;
  entry["num_ranks"] = header.num_ranks();
  entry["format_version"] = header.format_version;
  std::uint64_t blobs = 0;
  std::uint64_t blob_bytes = 0;
  auto nodes = nlohmann::json::object();
  for (const auto& node : header.node_names) {
    auto node_blobs = nlohmann::json::array();
    for (const auto& record : header.blobs.at(node)) {
      ++blobs;
      blob_bytes += record.byte_size();
      if (options.blobs) {
        node_blobs.push_back(blob_entry(record));
      }
    }
    nodes[node] = std::move(node_blobs);
  }
  entry["num_nodes"] = header.node_names.size();
  entry["num_blobs"] = blobs + header.replicated.size() + header.arrays.size();
  entry["blob_bytes"] = header.total_blob_bytes();
  if (options.blobs) {
    entry["nodes"] = std::move(nodes);
    entry["node_names"] = header.node_names;  // rank order (the object's keys are sorted)
  }
  if (header.format_version >= 3) {
    describe_shared(header, options, entry);
  }
}

std::string text_of(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// One line per blob, names and types in aligned columns.
void print_blob_lines(std::ostream& out, const nlohmann::json& blobs) {
  std::size_t name_width = 0;
  std::size_t type_width = 0;
  for (const auto& blob : blobs) {
    name_width = std::max(name_width, blob["name"].get<std::string>().size());
    type_width = std::max(type_width, blob["dtype"].get<std::string>().size() +
                                          shape_to_string(blob["shape"].get<Shape>()).size());
  }
  for (const auto& blob : blobs) {
    const auto name = blob["name"].get<std::string>();
    const auto type =
        blob["dtype"].get<std::string>() + shape_to_string(blob["shape"].get<Shape>());
    out << "    " << name << std::string(name_width - name.size() + 2, ' ') << type
        << std::string(type_width - type.size() + 2, ' ') << blob["bytes"] << " bytes  xxh64 "
        << blob["xxh64"].get<std::string>() << "\n";
  }
}

void print_blob_tree(std::ostream& out, const nlohmann::json& entry) {
  for (const auto& node : entry["node_names"]) {
    out << "  " << node.get<std::string>() << "/\n";
    print_blob_lines(out, entry["nodes"][node.get<std::string>()]);
  }
  // Version 3: the blobs stored once, under the names of their groups in the file.
  if (entry.contains("replicated") && !entry["replicated"].empty()) {
    out << "  replicated/\n";
    print_blob_lines(out, entry["replicated"]);
  }
  if (entry.contains("arrays") && !entry["arrays"].empty()) {
    out << "  arrays/\n";
    for (const auto& array : entry["arrays"]) {
      print_array(out, array, "    ");
    }
  }
}

void print_verification(std::ostream& out, const nlohmann::json& entry) {
  if (!entry.contains("verified")) {
    out << "  checked: " << kOpenChecks << "\n  found: " << entry["error"].get<std::string>()
        << " (no blob read)\n";
    return;
  }
  const auto& verified = entry["verified"];
  out << "  checked: " << kOpenChecks << "; " << verified["blobs_checked"] << " blobs' xxh64 ("
      << verified["bytes_read"] << " bytes read)\n";
  if (verified["problems"].empty()) {
    out << "  found: nothing wrong\n";
  }
  for (const auto& problem : verified["problems"]) {
    out << "  found: " << problem["blob"].get<std::string>() << ": "
        << problem["error"].get<std::string>() << "\n";
  }
}

}  // namespace

nlohmann::json record_json(const BlobRecord& record) {
  char xxh64[17];
  std::snprintf(xxh64, sizeof xxh64, "%016llx", static_cast<unsigned long long>(record.xxh64));
  return {{"dtype", dtype_name(record.dtype)},
          {"shape", record.shape},
          {"bytes", record.byte_size()},
          {"xxh64", xxh64}};
}

std::optional<nlohmann::json> describe_checkpoint(const CheckpointChoice& choice,
                                                  const ListingOptions& options) {
  nlohmann::json entry = {
      {"epoch", choice.epoch ? nlohmann::json(*choice.epoch) : nlohmann::json(nullptr)},
      {"file", choice.epoch ? choice.file.filename().string() : choice.file.string()}};
  try {
    // The reader keeps the file open: once it is open, a deletion cannot take it away.
    auto reader = open_checkpoint(choice);
    entry["bytes"] = reader.file_bytes();
    entry["epoch"] = reader.header().epoch;
    describe_contents(reader, options, entry);
    entry["valid"] = true;
    if (options.verify) {
      entry["verified"] = verify_blobs(reader);
      const auto& problems = entry["verified"]["problems"];
      if (!problems.empty()) {
        entry["valid"] = false;
        entry["error"] =
            problems[0]["blob"].get<std::string>() + ": " +
            problems[0]["error"].get<std::string>() +
            (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more blobs)"
                                 : "");
      }
    }
  } catch (const CheckpointNotFound&) {
    if (choice.epoch) {
      return std::nullopt;  // deleted since it was listed
    }
    throw;  // the file the user named is not there
  } catch (const std::exception& error) {
    if (!entry.contains("bytes")) {
      struct stat status {};
      if (::lstat(choice.file.c_str(), &status) != 0) {
        return std::nullopt;  // deleted while it was being opened
      }
      entry["bytes"] = static_cast<std::uint64_t>(status.st_size);
    }
    entry["valid"] = false;
    entry["error"] = error.what();
  }
  return entry;
}

void print_checkpoints(std::ostream& out, const nlohmann::json& entries,
                       const ListingOptions& options) {
  for (const auto& entry : entries) {
    out << "epoch " << (entry["epoch"].is_null() ? "?" : entry["epoch"].dump()) << "  "
        << entry["file"].get<std::string>() << "  " << entry["bytes"] << " bytes";
    if (entry.contains("job")) {
      out << "  job " << text_of(entry["job"]) << "  " << entry["num_ranks"] << " ranks  "
          << entry["num_blobs"] << " blobs  " << entry["blob_bytes"] << " blob bytes  format "
          << entry["format_version"];
      if (entry.contains("num_arrays")) {
        out << " (" << entry["num_per_node_blobs"] << " per-node, " << entry["num_replicated"]
            << " replicated, " << entry["num_arrays"] << " global arrays)";
      }
    }
    out << (entry["valid"].get<bool>() ? (options.verify ? "  OK" : "")
                                       : "  CORRUPT: " + entry["error"].get<std::string>())
        << "\n";
    if (options.verify) {
      print_verification(out, entry);
    }
    if (options.blobs && entry.contains("nodes")) {
      print_blob_tree(out, entry);
    }
  }
}

}  // namespace epochrun::cli
