// The steps of a save as the asynchronous saver uses them: begin and finish on the main thread,
// write_data on another thread with no MPI call; a failure in the data step of one rank fails
// the save on every rank and leaves no file; a save dropped before finish leaves none either.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <thread>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/names.hpp"
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

// blob_views walks the workspace alongside names in its order; any other order, a subset and a
// missing name must give what looking each name up gives.
TEST(BlobViews, AreTheNamedBlobsInTheGivenOrderAndAMissingNameIsAUsageError) {
  const auto workspace = workspace_of(Communicator::world());
  for (const auto& names : std::vector<std::vector<std::string>>{
           {"state", "step", "weights"}, kNames, {"weights"}, {"step", "state"}, {}}) {
    const auto views = blob_views(workspace, names);
    ASSERT_EQ(views.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(views[i].name, names[i]);
      EXPECT_EQ(views[i].bytes.data(), workspace.get(names[i]).raw().data()) << names[i];
    }
  }
  EXPECT_THROW(blob_views(workspace, {"state", "nope", "weights"}), UsageError);
  EXPECT_THROW(blob_views(workspace, {"weights", "zzz"}), UsageError);
}

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

// The lay-out reserves the whole file before any data is written (so that a disk filled
// meanwhile cannot fail the save): also when one long name and one blob of 32 dimensions widen
// every row of a node's blob index of 1,000 rows.
TEST_F(PendingCheckpointTest, TheReservationCoversAFileWhoseIndexRowsAreWidenedByOneBlob) {
  Workspace wide;
  for (int i = 0; i < 1000; ++i) {
    wide.put("b" + std::to_string(1000 + i),
             Blob::of<std::uint8_t>({1}, std::vector<std::uint8_t>{7}));
  }
  wide.put(std::string(kMaxNameLength, 'n'),
           Blob::of<std::uint8_t>({1}, std::vector<std::uint8_t>{8}));
  wide.put("deep", Blob::of<std::uint8_t>(Shape(32, 1), std::vector<std::uint8_t>{9}));
  auto pending = PendingCheckpoint::begin(file, world, header_for(world, 3),
                                          blob_views(wide, wide.names()), std::chrono::seconds(60));
  if (world.is_root()) {
    // Laid out, not yet written: what is allocated is the reservation and HDF5's metadata.
    struct stat status {};
    ASSERT_EQ(::stat(file.c_str(), &status), 0);
    EXPECT_GE(status.st_blocks * 512, status.st_size);
  }
  pending.write_data();
  pending.finish();
}

TEST_F(PendingCheckpointTest, ABlobOfMoreDimensionsThanAFileHoldsFailsTheSaveOnEveryRank) {
  auto deep = workspace_of(world);
  if (world.rank() == world.size() - 1) {
    deep.put("deep", Blob::of<std::uint8_t>(Shape(33, 1), std::vector<std::uint8_t>{9}));
  }
  try {
    PendingCheckpoint::begin(file, world, header_for(world, 3), blob_views(deep, deep.names()),
                             std::chrono::seconds(60));
    ADD_FAILURE() << "begin succeeded on rank " << world.rank();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("blob 'deep' has 33 dimensions; a checkpoint holds at most 32"),
              std::string::npos)
        << error.what();
  }
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
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
