// The steps of a save as the asynchronous saver uses them: begin and finish on the main thread,
// write_data on another thread with no MPI call; a failure in the data step of one rank fails
// the save on every rank and leaves no file; a save dropped before finish leaves none either.
#include <gtest/gtest.h>

#include <thread>

#include "epochrun/checkpoint_file.hpp"
#include "pending_checkpoint.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

CheckpointHeader header_for(const Communicator& comm, std::int64_t epoch) {
  CheckpointHeader header;
  header.epoch = epoch;
  header.job = "pending_test";
  for (int rank = 0; rank < comm.size(); ++rank) {
    header.node_names.push_back("node_" + std::to_string(rank));
  }
  header.config_json = "{}";
  return header;
}

Workspace workspace_of(const Communicator& comm) {
  Workspace workspace;
  std::vector<double> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<double>(comm.rank()) * 1e6 + static_cast<double>(i);
  }
  workspace.put("weights", Blob::of<double>({10, 100}, values));
  workspace.put("step", Blob::scalar<std::int64_t>(41 + comm.rank()));
  const std::string state = "opaque state of rank " + std::to_string(comm.rank());
  workspace.put("state", Blob::bytes(std::as_bytes(std::span(state))));
  return workspace;
}

const std::vector<std::string> kNames = {"weights", "step", "state"};

// Every rank's workspace and a file name in a directory all ranks share.
class PendingCheckpointTest : public ::testing::Test {
 protected:
  PendingCheckpoint begin() {
    return PendingCheckpoint::begin(file, world, header_for(world, 3),
                                    blob_views(workspace, kNames), std::chrono::seconds(60));
  }

  const Communicator world = Communicator::world();
  ScratchDir directory{world};
  const std::filesystem::path file = directory / "pending.h5";
  const Workspace workspace = workspace_of(world);
};

TEST_F(PendingCheckpointTest, WriteDataOnAnotherThreadGivesAFileThatLoadsBitIdentical) {
  auto pending = begin();
  std::thread writer([&] { pending.write_data(); });
  writer.join();
  pending.finish();
  EXPECT_EQ(pending.bytes_written(), workspace.byte_size());
  if (world.is_root()) {
    EXPECT_EQ(pending.file_bytes(), std::filesystem::file_size(file));
  }
  world.barrier();
  CheckpointReader reader(file);
  const auto node = "node_" + std::to_string(world.rank());
  for (const auto& name : kNames) {
    EXPECT_EQ(reader.read_blob(node, name), workspace.get(name)) << name;
  }
  world.barrier();
}

TEST_F(PendingCheckpointTest, AFailedDataStepOnOneRankFailsFinishOnEveryRankAndRemovesTheFile) {
  auto pending = begin();
  {
    // The last rank cannot write past 16 bytes: its data step fails, and must not throw.
    std::optional<FileSizeLimit> limit;
    if (world.rank() == world.size() - 1) {
      limit.emplace(16);
    }
    std::thread writer([&] { pending.write_data(); });
    writer.join();
  }
  try {
    pending.finish();
    ADD_FAILURE() << "finish succeeded on rank " << world.rank();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("file size limit"), std::string::npos) << error.what();
  }
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(PendingCheckpointTest, ASaveDroppedBeforeFinishLeavesNoFile) {
  {
    auto pending = begin();
    world.barrier();
    EXPECT_TRUE(std::filesystem::exists(file));
    // Every rank looked before rank 0 drops it (and removes the file).
    world.barrier();
  }
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(PendingCheckpointTest, AnExistingFileIsNeitherOverwrittenNorRemoved) {
  if (world.is_root()) {
    write_file(file, "someone else's");
  }
  world.barrier();
  EXPECT_THROW(begin(), Error);
  world.barrier();
  EXPECT_EQ(read_file(file), "someone else's");
}

}  // namespace
}  // namespace epochrun::testing
