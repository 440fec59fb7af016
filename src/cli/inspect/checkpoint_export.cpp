#include "inspect/checkpoint_export.hpp"

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "inspect/npy_writer.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// Removes what an export made, on failure: the node directories, and `directory` when the
// export created it (an empty directory the user gave stays).
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

  void made(const fs::path& node) { nodes_.push_back(node); }
  void succeeded() { done_ = true; }

 private:
  fs::path directory_;
  bool created_;
  std::vector<fs::path> nodes_;
  bool done_ = false;
};

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
    const auto node_directory = directory / node;
    if (!fs::create_directory(node_directory, error) || error) {
      throw Error("cannot create " + node_directory.string() + ": " +
                  (error ? error.message() : "it exists already"));
    }
    cleanup.made(node_directory);
    for (const auto& record : header.blobs.at(node)) {
      const auto relative = fs::path(node) / (record.name + ".npy");
      write_npy(directory / relative, reader.read_blob(node, record.name));
      files.push_back({{"blob", node + "/" + record.name},
                       {"file", relative.string()},
                       {"dtype", dtype_name(record.dtype)},
                       {"shape", record.shape}});
    }
  }
  cleanup.succeeded();
  return files;
}

}  // namespace epochrun::cli
