// CheckpointSaver's asynchronous save of a global array, in the test's own MPI processes: at
// MPI_THREAD_MULTIPLE (what MpiSession asks for and Open MPI gives) the background thread writes
// the array with its collective MPI-IO write, while the job's thread goes on; the commit at the
// next boundary then only renames. The poll for the written bytes is bounded; the job's thread
// makes no MPI call meanwhile, so the collective write cannot be waiting for it.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "checkpoint_saver.hpp"
#include "mpi_thread_level.hpp"
#include "post_commit_steps.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::uint64_t kRowsPerRank = 64;
constexpr std::uint64_t kColumns = 1024;

// Whether some file in `directory` holds `bytes` in one piece.
bool some_file_holds(const std::filesystem::path& directory, const std::string& bytes) {
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ignored)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    if (content.find(bytes) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(CheckpointSaver, AnAsynchronousSaveWritesItsGlobalArrayBeforeTheJobAsksForTheCommit) {
  const auto world = Communicator::world();
  ASSERT_TRUE(mpi_calls_from_any_thread()) << "MpiSession initialises MPI at MULTIPLE";
  const auto ranks = static_cast<std::uint64_t>(world.size());
  const auto rank = static_cast<std::uint64_t>(world.rank());
  ScratchDir directory(world);
  CheckpointOptions options;
  options.checkpoint_dir = directory / "ck";
  options.async_checkpoint = true;
  PostCommitSteps post_commit(world, options, "saver_job");
  std::vector<std::string> nodes;
  std::vector<Block> blocks;
  for (std::uint64_t r = 0; r < ranks; ++r) {
    nodes.push_back("node_" + std::to_string(r));
    blocks.push_back(Block{{r * kRowsPerRank, 0}, {kRowsPerRank, kColumns}});
  }
  const Shape global{ranks * kRowsPerRank, kColumns};
  CheckpointSaver saver("saver_job", world, options, nodes, post_commit);
  saver.set_blobs({BlobPlan{"field", StorageKind::kGlobalArray, global,
                            std::make_shared<const std::vector<Block>>(blocks)}});
  // This rank's block: a value of its own in every element, found nowhere else in the file.
  std::vector<double> values(kRowsPerRank * kColumns, 1000.25 + static_cast<double>(rank));
  Workspace workspace;
  workspace.put("field", Blob::of<double>({kRowsPerRank, kColumns}, values));
  const std::string block(reinterpret_cast<const char*>(values.data()),
                          values.size() * sizeof(double));

  const auto started = saver.save(1, workspace, true);
  ASSERT_TRUE(started.in_background) << started.log;
  bool written = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!written && std::chrono::steady_clock::now() < give_up) {
    written = some_file_holds(options.checkpoint_dir, block);
    if (!written) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(written) << "rank " << rank
                       << "'s block was not in the checkpoint directory after 60 s: the "
                          "collective write waits for the commit";
  const auto completed = saver.complete();
  ASSERT_TRUE(completed.has_value());
  EXPECT_TRUE(completed->committed) << completed->log;
  EXPECT_EQ(saver.last_committed(), 1);
}

}  // namespace
}  // namespace epochrun::testing
