// A resume never continues from the wrong state: another job's checkpoint, another rank count
// or damaged bytes are refused with an error that names what is wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <functional>

#include "checkpoint_directory_admin.hpp"
#include "directory_lock.hpp"
#include "epochrun/blob_file.hpp"
#include "epochrun/errors.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// Runs sum_pipeline to its end in `directory`, then lets rank 0 damage one committed file.
template <typename Damage>
std::filesystem::path run_then_damage(const Communicator& comm,
                                      const std::filesystem::path& directory, std::int64_t epoch,
                                      Damage damage) {
  Workspace workspace;
  run_sum_pipeline(comm, options_for(directory), workspace);
  const auto file = CheckpointDirectory(directory).file_for(epoch);
  if (comm.is_root()) {
    damage(file);
  }
  comm.barrier();
  return file;
}

// Every file of a directory and its bytes, but the lock file: a run creates it if missing and
// leaves it (empty) when it ends (directory_lock.hpp).
std::map<std::string, std::string> snapshot(const std::filesystem::path& directory) {
  std::map<std::string, std::string> files;
  for (const auto& name : list_directory(directory)) {
    if (name != kLockFileName) {
      files[name] = read_file(directory / name);
    }
  }
  return files;
}

// The resume must fail with `Exception` on every rank and leave the directory byte-identical.
template <typename Exception>
std::string expect_resume_fails(const Communicator& comm, Job job,
                                const std::filesystem::path& directory, std::int64_t epoch) {
  const auto before = snapshot(directory);
  comm.barrier();  // every rank has looked before rank 0 takes the directory lock
  Workspace workspace;
  try {
    JobRunner(std::move(job), comm, options_for(directory, ResumeRequest::at(epoch)))
        .run(workspace);
  } catch (const Exception& error) {
    comm.barrier();
    EXPECT_EQ(snapshot(directory), before) << "a refused resume changed the checkpoint directory";
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
  // The second copy of the reader values 0..9 in the file is trainer_1's.
  const auto file =
      run_then_damage(world, directory.path(), 3, [](const std::filesystem::path& damaged) {
        ASSERT_TRUE(flip_bit_in_pattern(damaged, int64_bytes(0, 10), 1, 8 * 5));
      });
  auto message =
      expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 3);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("/nodes/values[1] (trainer_1)"), std::string::npos) << message;
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
}

TEST(CheckpointValidation, ATruncatedFileIsReportedAsCorrupt) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  const auto file =
      run_then_damage(world, directory.path(), 2, [](const std::filesystem::path& damaged) {
        auto bytes = read_file(damaged);
        write_file(damaged, bytes.substr(0, bytes.size() / 3));
      });
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

// The guards that run before libhdf5 parses a file. A blob's name is stored twice: in the
// layout record of the user block, which a load reads instead of HDF5's metadata, and in that
// metadata (link names and attributes). A damaged byte of the record fails the resume by the
// record's own checksum; a damaged byte of the metadata is caught by the integrity header's
// metadata hash, which every reader checks, the resume included (docs/FORMAT.md, "What every
// reader checks").
TEST(CheckpointValidation, AFlippedMetadataByteIsCaughtBeforeHdf5ParsesTheFile) {
  const auto world = Communicator::world();
  {
    ScratchDir directory(world);
    run_then_damage(world, directory.path(), 3, [](const std::filesystem::path& damaged) {
      ASSERT_TRUE(flip_bit_in_pattern(damaged, "exhausted", 0, 2));
    });
    auto message = expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(),
                                                          directory.path(), 3);
    EXPECT_NE(message.find("the layout record's checksum does not match"), std::string::npos)
        << message;
  }
  ScratchDir directory(world);
  const auto file =
      run_then_damage(world, directory.path(), 3, [](const std::filesystem::path& damaged) {
        ASSERT_TRUE(flip_bit_in_pattern(damaged, "exhausted", 1, 2));
      });
  try {
    CheckpointReader reader{file};
    ADD_FAILURE() << "the HDF5 reader took a file with damaged metadata";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what())
                  .find("HDF5 metadata does not match the checksum recorded at commit"),
              std::string::npos)
        << error.what();
  }
  const auto message =
      expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 3);
  EXPECT_NE(message.find("HDF5 metadata does not match the checksum recorded at commit"),
            std::string::npos)
      << message;
}

TEST(CheckpointValidation, AValidHdf5FileWithoutTheIntegrityHeaderIsRefused) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  if (world.is_root()) {
    std::filesystem::create_directories(directory.path());
    write_blob_file(CheckpointDirectory(directory.path()).file_for(1),
                    {{"total", Blob::scalar<std::int64_t>(1)}},
                    {{"format", "epochrun-checkpoint"}});
  }
  world.barrier();
  auto message =
      expect_resume_fails<CorruptCheckpoint>(world, jobs::make_sum_pipeline(), directory.path(), 1);
  EXPECT_NE(message.find("no epochrun integrity header"), std::string::npos) << message;
}

// Damages epoch 4 of a finished run; `latest` must skip it with `expected` in its reason,
// resume from epoch 3, and run epoch 4 again, replacing its checkpoint by a good one.
template <typename Damage>
void expect_latest_skips_damaged_epoch_4(Damage damage, const std::string& expected) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  run_then_damage(world, directory.path(), 4, damage);
  Workspace workspace;
  auto summary =
      run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::latest()), workspace);
  EXPECT_EQ(summary.resumed_from, 3);
  ASSERT_EQ(summary.skipped_corrupt.size(), 1u);
  EXPECT_EQ(summary.skipped_corrupt[0].epoch, 4);
  EXPECT_NE(summary.skipped_corrupt[0].error.find(expected), std::string::npos)
      << summary.skipped_corrupt[0].error;
  EXPECT_EQ(total_of(workspace), 145);
  Workspace reloaded;
  load_checkpoint(CheckpointDirectory(directory.path()), world, sum_pipeline_expectation(world, 4),
                  reloaded);
  EXPECT_EQ(total_of(reloaded), 145);
}

// What is not a committed checkpoint under an epoch's name (nothing, a symlink to a good
// checkpoint, a directory, a FIFO) is refused as missing on every rank, naming the epochs that
// are committed, never opened through nor waited on: the load's rank 0 tells them apart with the
// one open it makes of the file.
TEST(CheckpointValidation, WhatIsNotACommittedFileUnderAnEpochsNameIsMissing) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace workspace;
  run_sum_pipeline(world, options_for(directory.path()), workspace);
  const CheckpointDirectory checkpoints(directory.path());
  const auto file = checkpoints.file_for(9);
  const std::vector<std::pair<std::string, std::function<void()>>> planted = {
      {"nothing", [] {}},
      {"a symlink", [&] { std::filesystem::create_symlink(checkpoints.file_for(4), file); }},
      {"a directory", [&] { std::filesystem::create_directory(file); }},
      {"a FIFO", [&] { ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0); }}};
  for (const auto& [what, plant] : planted) {
    if (world.is_root()) {
      std::filesystem::remove(file);
      plant();
    }
    world.barrier();
    Workspace loaded;
    try {
      load_checkpoint(checkpoints, world, sum_pipeline_expectation(world, 9), loaded);
      ADD_FAILURE() << what << " was loaded";
    } catch (const CheckpointNotFound& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("no committed checkpoint for epoch 9"), std::string::npos)
          << what << ": " << message;
      EXPECT_NE(message.find("committed epochs: "), std::string::npos) << what << ": " << message;
    } catch (const std::exception& error) {
      ADD_FAILURE() << what << ": wrong error class: " << error.what();
    }
    EXPECT_TRUE(loaded.names().empty()) << what;
    world.barrier();
  }
}

TEST(CheckpointValidation, LatestSkipsACorruptNewestEpochAndRecommitsIt) {
  expect_latest_skips_damaged_epoch_4(
      [](const std::filesystem::path& damaged) {
        ASSERT_TRUE(flip_bit_in_pattern(damaged, int64_bytes(0, 10), 2, 8));
      },
      "checksum mismatch");
}

// One bit flipped in the integrity header's version field: damage, so `latest` skips that
// epoch (before, it was taken for another version and failed the whole resume with exit 3).
TEST(CheckpointValidation, LatestSkipsAnEpochWhoseHeaderVersionIsDamaged) {
  expect_latest_skips_damaged_epoch_4(
      [](const std::filesystem::path& damaged) {
        ASSERT_TRUE(flip_bit_in_pattern(damaged, "EPOCHRUN-CKPT-INTEGRITY\n", 0, 24));
      },
      "damaged header");
}

TEST(CheckpointValidation, LatestStartsFromScratchWhenEveryEpochIsCorrupt) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);
  if (world.is_root()) {
    for (std::int64_t epoch = 0; epoch <= 4; ++epoch) {
      write_file(CheckpointDirectory(directory.path()).file_for(epoch), "garbage");
    }
  }
  world.barrier();
  Workspace workspace;
  auto summary =
      run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::latest()), workspace);
  EXPECT_FALSE(summary.resumed_from.has_value());
  EXPECT_EQ(summary.skipped_corrupt.size(), 5u);
  EXPECT_EQ(total_of(workspace), 145);
}

TEST(CheckpointValidation, AChangedBlobShapeIsRefusedAndNamed) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);
  jobs::SumPipelineOptions changed;
  changed.num_items = 12;
  auto message = expect_resume_fails<CheckpointMismatch>(world, jobs::make_sum_pipeline(changed),
                                                         directory.path(), 2);
  EXPECT_NE(message.find("'values' is i64[10] there, but the job now expects i64[12]"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace epochrun::testing
