#include "inspect/checkpoint_export.hpp"

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "inspect/npy_writer.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// Removes what an export made, on failure: the node (and replicated, arrays) directories, and
// `directory` when the export created it (an empty directory the user gave stays).
class ExportCleanup {
 public:
  ExportCleanup(fs::path directory, bool created)
      : directory_(std::move(directory)), created_(created) {}
  ~ExportCleanup() {
    if (done_) {
      return;
    }
    std::error_code ignored;
    for (const auto& node : nodes_) {
      fs::remove_all(node, ignored);
    }
    if (created_) {
      fs::remove(directory_, ignored);
    }
  }
  ExportCleanup(const ExportCleanup&) = delete;
  ExportCleanup& operator=(const ExportCleanup&) = delete;

  void made(const fs::path& path) { nodes_.push_back(path); }
  void succeeded() { done_ = true; }

 private:
  fs::path directory_;
  bool created_;
  std::vector<fs::path> nodes_;
  bool done_ = false;
};

// A new directory of the export, removed again if the export fails.
void make_directory(const fs::path& made, ExportCleanup& cleanup) {
  std::error_code error;
  if (!fs::create_directory(made, error) || error) {
    throw Error("cannot create " + made.string() + ": " +
                (error ? error.message() : "it exists already"));
  }
  cleanup.made(made);
}

// Version 3's blobs stored once: each replicated blob as replicated/BLOB.npy, each global array
// whole, in its global shape, as arrays/ARRAY.npy (whatever ranks wrote it).
void export_shared(const CheckpointReader& reader, const fs::path& directory,
                   ExportCleanup& cleanup, nlohmann::json& files) {
  const auto& header = reader.header();
  const auto write = [&](const std::string& group, const std::string& name, const Blob& blob) {
    const auto relative = fs::path(group) / (name + ".npy");
    write_npy(directory / relative, blob);
    files.push_back({{"blob", group + "/" + name},
                     {"file", relative.string()},
                     {"dtype", dtype_name(blob.dtype())},
                     {"shape", blob.shape()}});
  };
  if (!header.replicated.empty()) {
    make_directory(directory / "replicated", cleanup);
  }
  for (const auto& record : header.replicated) {
    write("replicated", record.name, reader.read_replicated(record.name));
  }
  if (!header.arrays.empty()) {
    make_directory(directory / "arrays", cleanup);
  }
  for (const auto& array : header.arrays) {
    write("arrays", array.name, reader.read_array(array.name));
  }
}

}  // namespace

nlohmann::json export_checkpoint(const CheckpointReader& reader, const fs::path& directory) {
  std::error_code error;
  const bool existed = fs::exists(fs::symlink_status(directory, error));
  if (existed && (!fs::is_directory(directory, error) || !fs::is_empty(directory, error))) {
    throw UsageError("--export " + directory.string() +
                     " exists and is not an empty directory; give a new one");
  }
  create_private_directories(directory);
  ExportCleanup cleanup(directory, !existed);
  auto files = nlohmann::json::array();
  const auto& header = reader.header();
  for (const auto& node : header.node_names) {
    make_directory(directory / node, cleanup);
    for (const auto& record : header.blobs.at(node)) {
      const auto relative = fs::path(node) / (record.name + ".npy");
      write_npy(directory / relative, reader.read_blob(node, record.name));
      files.push_back({{"blob", node + "/" + record.name},
                       {"file", relative.string()},
                       {"dtype", dtype_name(record.dtype)},
                       {"shape", record.shape}});
    }
  }
  export_shared(reader, directory, cleanup, files);
  cleanup.succeeded();
  return files;
}

}  // namespace epochrun::cli
