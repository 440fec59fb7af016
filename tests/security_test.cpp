// Checkpoints are never group- or world-writable, and nothing is ever written through a symlink
// planted in the checkpoint or the upload directory.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "checkpoint_directory_admin.hpp"
#include "epochrun/blob_file.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

mode_t mode_of(const std::filesystem::path& path) {
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

// Nothing is group- or world-writable, whatever the umask, and the modes are what
// docs/FORMAT.md says: checkpoints and blob files 0644 under any umask; the index and the
// uploaded copy 0644, the directories epochrun creates 0755, both narrowed by the umask.
TEST(Security, FilesAndDirectoriesAreNotGroupOrWorldWritableWhateverTheUmask) {
  const auto world = Communicator::world();
  for (const mode_t mask : {mode_t{0}, mode_t{077}}) {
    ScratchDir scratch(world);
    const mode_t saved = ::umask(mask);
    auto options = options_for(scratch / "deep/checkpoints");
    options.uploader = make_uploader((scratch / "upload").string());
    Workspace workspace;
    run_sum_pipeline(world, options, workspace);
    if (world.is_root()) {
      write_blob_file(scratch / "model.h5", {{"total", workspace.get("total")}}, {});
    }
    ::umask(saved);
    world.barrier();
    if (world.is_root()) {
      EXPECT_EQ(mode_of(scratch / "model.h5"), 0644) << "umask " << mask;
      const auto checkpoints = scratch / "deep/checkpoints";
      for (const auto& directory : {scratch / "deep", checkpoints, scratch / "upload"}) {
        EXPECT_EQ(mode_of(directory), 0755 & ~mask) << directory << " umask " << mask;
      }
      for (const auto& name : list_directory(checkpoints)) {
        EXPECT_EQ(mode_of(checkpoints / name) & (S_IWGRP | S_IWOTH), 0u) << name;
      }
      for (std::int64_t epoch = 0; epoch <= 4; ++epoch) {
        EXPECT_EQ(mode_of(checkpoints / checkpoint_file_name(epoch)), 0644) << "umask " << mask;
      }
      EXPECT_EQ(mode_of(checkpoints / kIndexFileName), 0644 & ~mask) << "umask " << mask;
      EXPECT_EQ(mode_of(scratch / "upload" / checkpoint_file_name(4)), 0644 & ~mask)
          << "umask " << mask;
    }
  }
}

TEST(Security, PlantedSymlinksAreReplacedNeverWrittenThrough) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto checkpoints = scratch / "checkpoints";
  const auto upload = scratch / "upload";
  const std::vector<std::pair<std::filesystem::path, std::filesystem::path>> planted = {
      {checkpoints / kIndexFileName, scratch / "victim_index"},
      {checkpoints / checkpoint_file_name(2), scratch / "victim_epoch"},
      {upload / checkpoint_file_name(4), scratch / "victim_upload"},
  };
  if (world.is_root()) {
    std::filesystem::create_directories(checkpoints);
    std::filesystem::create_directories(upload);
    for (const auto& [link, victim] : planted) {
      write_file(victim, "precious");
      std::filesystem::create_symlink(victim, link);
    }
    // A symlink under a checkpoint's name is never taken for a committed checkpoint.
    std::filesystem::create_symlink(scratch / "victim_epoch",
                                    checkpoints / checkpoint_file_name(9));
  }
  world.barrier();
  EXPECT_EQ(CheckpointDirectory(checkpoints).committed_epochs(), std::vector<std::int64_t>{});

  auto options = options_for(checkpoints, ResumeRequest::latest());
  options.uploader = make_uploader(upload.string());
  Workspace workspace;
  auto summary = run_sum_pipeline(world, options, workspace);
  EXPECT_FALSE(summary.resumed_from.has_value());
  EXPECT_TRUE(summary.uploaded_to.has_value());
  world.barrier();
  if (world.is_root()) {
    for (const auto& [link, victim] : planted) {
      EXPECT_EQ(read_file(victim), "precious") << "written through " << link;
      EXPECT_FALSE(std::filesystem::is_symlink(link)) << link;
      EXPECT_TRUE(std::filesystem::is_regular_file(link)) << link;
    }
  }
}

// Stale-temporary cleanup (at the start of a run, before an upload) deletes what an interrupted
// epochrun write left, and nothing of the user's that merely looks alike.
TEST(Security, StaleTemporaryCleanupRemovesOnlyEpochrunsOwnTemporaries) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto checkpoints = scratch / "checkpoints";
  const auto upload = scratch / "upload";
  const std::vector<std::string> users = {
      ".notes.tmp.txt", ".epoch-000002.h5.tmp.draft", ".index.json.tmp.1.2",
      ".epoch-000002.h5.tmp.4242.0123456789ABCDEF", ".epoch-000002.h5.tmp.4242.0123456789abcde",
      // epochrun's format, but a target epochrun never writes here
      ".model.h5.tmp.4242.0123456789abcdef"};
  const std::string stale_checkpoint = ".epoch-000002.h5.tmp.4242.0123456789abcdef";
  const std::string stale_index = ".index.json.tmp.4242.fedcba9876543210";
  if (world.is_root()) {
    for (const auto& directory : {checkpoints, upload}) {
      std::filesystem::create_directories(directory);
      for (const auto& name : users) {
        write_file(directory / name, "the user's");
      }
      write_file(directory / stale_checkpoint, "left by a killed save or upload");
    }
    write_file(checkpoints / stale_index, "left by a killed index update");
  }
  world.barrier();

  auto options = options_for(checkpoints, ResumeRequest::latest());
  options.uploader = make_uploader(upload.string());
  Workspace workspace;
  auto summary = run_sum_pipeline(world, options, workspace);
  EXPECT_TRUE(summary.uploaded_to.has_value());
  world.barrier();
  if (world.is_root()) {
    for (const auto& directory : {checkpoints, upload}) {
      for (const auto& name : users) {
        EXPECT_EQ(read_file(directory / name), "the user's") << directory / name;
      }
      EXPECT_FALSE(std::filesystem::exists(directory / stale_checkpoint)) << directory;
    }
    EXPECT_FALSE(std::filesystem::exists(checkpoints / stale_index));
  }
}

}  // namespace
}  // namespace epochrun::testing
