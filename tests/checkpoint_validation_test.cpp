// A resume never continues from the wrong state: another job's checkpoint, another rank count
// or damaged bytes are refused with an error that names what is wrong.
#include <gtest/gtest.h>

#include <fstream>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

void write_file(const std::filesystem::path& file, const std::string& content) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
}

template <typename Exception>
std::string expect_resume_fails(const Communicator& comm, Job job,
                                const std::filesystem::path& directory, std::int64_t epoch) {
  Workspace workspace;
  try {
    JobRunner(std::move(job), comm, options_for(directory, ResumeRequest::at(epoch)))
        .run(workspace);
  } catch (const Exception& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "wrong error class: " << error.what();
    return "";
  }
  ADD_FAILURE() << "resume succeeded";
  return "";
}

TEST(CheckpointValidation, AnotherJobsCheckpointIsRefused) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace workspace;
  run_sum_pipeline(world, options_for(directory.path()), workspace);
  auto message =
      expect_resume_fails<CheckpointMismatch>(world, Job("other_job"), directory.path(), 2);
  EXPECT_NE(message.find("'sum_pipeline'"), std::string::npos) << message;
  EXPECT_NE(message.find("'other_job'"), std::string::npos) << message;
}

TEST(CheckpointValidation, AnotherRankCountIsRefused) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  if (world.is_root()) {
    Workspace workspace;
    run_sum_pipeline(Communicator::self(), options_for(directory.path()), workspace);
  }
  world.barrier();
  auto message = expect_resume_fails<CheckpointMismatch>(world, jobs::make_sum_pipeline(),
                                                         directory.path(), 2);
  EXPECT_NE(message.find("written by 1 ranks, this run has 3"), std::string::npos) << message;
}

TEST(CheckpointValidation, AFlippedDataByteIsReportedWithFileAndDataset) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace workspace;
  run_sum_pipeline(world, options_for(directory.path()), workspace);
  const auto file = CheckpointDirectory(directory.path()).file_for(3);
  if (world.is_root()) {
    // trainer_1's reader values 0..9 as little-endian int64: find them and flip one bit.
    auto bytes = read_file(file);
    std::string pattern;
    for (std::int64_t value = 0; value < 10; ++value) {
      pattern.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
    auto first = bytes.find(pattern);
    auto second = bytes.find(pattern, first + 1);
    ASSERT_NE(second, std::string::npos);
    bytes[second + 8 * 5] ^= 0x10;
    write_file(file, bytes);
  }
  world.barrier();
  auto message =
      expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 3);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("/nodes/trainer_1/values"), std::string::npos) << message;
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
}

TEST(CheckpointValidation, ATruncatedFileIsReportedAsCorrupt) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace workspace;
  run_sum_pipeline(world, options_for(directory.path()), workspace);
  const auto file = CheckpointDirectory(directory.path()).file_for(2);
  if (world.is_root()) {
    auto bytes = read_file(file);
    write_file(file, bytes.substr(0, bytes.size() / 3));
  }
  world.barrier();
  auto message =
      expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 2);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  // The serial reader used by partial loads and `inspect` says the same.
  EXPECT_THROW(CheckpointReader{file}, CorruptCheckpoint);
}

TEST(CheckpointValidation, AForeignHdf5OrTextFileIsNotACheckpoint) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  if (world.is_root()) {
    write_file(CheckpointDirectory(directory.path()).file_for(1), "this is not HDF5\n");
  }
  world.barrier();
  expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 1);
}

}  // namespace
}  // namespace epochrun::testing
