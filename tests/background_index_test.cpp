// index.json written by rank 0's thread of its own (BackgroundIndex): the job's thread only says
// that the index changed, and the writes are paced; whatever the pace, a flush, and the end of
// the writer, leave the file listing every epoch committed before them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>

#include "background_index.hpp"
#include "checkpoint_index.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// What index.json lists: its latest epoch and how many checkpoints.
std::pair<std::int64_t, std::size_t> listed(const CheckpointIndex& index) {
  const auto parsed = nlohmann::json::parse(read_file(index.file()));
  return {parsed.at("latest").get<std::int64_t>(), parsed.at("checkpoints").size()};
}

// Commits of epochs [first, end), each told to the writer as the run tells it.
void commit(CheckpointIndex& index, BackgroundIndex& writer, std::int64_t first, std::int64_t end) {
  for (auto epoch = first; epoch < end; ++epoch) {
    index.add(epoch, 1000 + static_cast<std::uint64_t>(epoch));
    writer.changed();
  }
}

class BackgroundIndexTest : public ::testing::Test {
 protected:
  ScratchDir directory;
  CheckpointIndex index{CheckpointDirectory(directory.path()), "job"};
};

TEST_F(BackgroundIndexTest, AFlushReturnsOnceTheFileListsEveryEpochCommittedBeforeIt) {
  BackgroundIndex writer(index);
  // Enough epochs that a write takes a while, so that later changes wait for the pace.
  commit(index, writer, 0, 3000);
  writer.flush();
  EXPECT_EQ(listed(index), std::make_pair(std::int64_t{2999}, std::size_t{3000}));
  commit(index, writer, 3000, 3010);
  writer.flush();
  EXPECT_EQ(listed(index), std::make_pair(std::int64_t{3009}, std::size_t{3010}));
}

TEST_F(BackgroundIndexTest, TheLastChangeIsWrittenWhenTheWriterEnds) {
  {
    BackgroundIndex writer(index);
    commit(index, writer, 0, 2000);
  }
  EXPECT_EQ(listed(index), std::make_pair(std::int64_t{1999}, std::size_t{2000}));
}

TEST_F(BackgroundIndexTest, ARetiredEpochLeavesTheFileAtTheNextFlush) {
  BackgroundIndex writer(index);
  commit(index, writer, 0, 5);
  writer.flush();
  std::optional<std::string> failure;
  index.retire({4}, failure);  // no file: forgotten all the same
  writer.changed();
  writer.flush();
  EXPECT_FALSE(failure);
  EXPECT_EQ(listed(index), std::make_pair(std::int64_t{3}, std::size_t{4}));
}

}  // namespace
}  // namespace epochrun::testing
