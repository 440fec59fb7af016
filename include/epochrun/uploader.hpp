// Where the final committed checkpoint is copied after the epoch loop. New destinations are
// new Uploader classes, chosen by URL scheme in make_uploader.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "epochrun/export.hpp"

namespace epochrun {

class EPOCHRUN_API Uploader {
 public:
  // Defined in the library, so that Uploader's vtable is too: one exported vtable, the same
  // with and without the sanitizers' instrumentation.
  virtual ~Uploader();
  // Copies the committed checkpoint `file`; returns where it now is. Throws Error on failure.
  virtual std::string upload(const std::filesystem::path& file) = 0;
  virtual std::string destination() const = 0;
};

// A local or shared-filesystem directory (created when missing). The copy is written under a
// temporary name, fsynced and renamed, so the destination never holds a partial checkpoint.
class EPOCHRUN_API DirectoryUploader : public Uploader {
 public:
  explicit DirectoryUploader(std::filesystem::path directory);
  std::string upload(const std::filesystem::path& file) override;
  std::string destination() const override { return directory_.string(); }

 private:
  std::filesystem::path directory_;
};

// "DIR" or "file://DIR"; any other scheme is a UsageError naming the supported ones.
EPOCHRUN_API std::unique_ptr<Uploader> make_uploader(const std::string& destination);

}  // namespace epochrun
