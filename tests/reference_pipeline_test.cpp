// The reference test (caffe2 checkpoint_test.py), case by case, over real MPI ranks and real
// parallel HDF5 files.
#include <gtest/gtest.h>

#include "checkpoint_directory_admin.hpp"
#include "epochrun/errors.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// The reference's run_with: a run to 4 epochs ending at 145, a resume from each of epochs 1..4
// ending at 145, and each epoch's checkpoint loading to that epoch's total.
void check_run_resume_and_load(const Communicator& comm, const std::filesystem::path& directory) {
  Workspace workspace;
  auto summary = run_sum_pipeline(comm, options_for(directory), workspace);
  EXPECT_EQ(summary.last_epoch, 4);
  EXPECT_EQ(summary.epochs_run, 4);
  EXPECT_EQ(total_of(workspace), 145);
  EXPECT_EQ(summary.committed, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(summary.failed_saves.empty());

  for (std::int64_t initial_epoch = 1; initial_epoch <= 4; ++initial_epoch) {
    Workspace resumed;
    auto resumed_summary =
        run_sum_pipeline(comm, options_for(directory, ResumeRequest::at(initial_epoch)), resumed);
    EXPECT_EQ(resumed_summary.resumed_from, initial_epoch);
    EXPECT_EQ(total_of(resumed), 145) << "resumed from epoch " << initial_epoch;
  }

  CheckpointDirectory checkpoints(directory);
  for (std::int64_t epoch = 1; epoch <= 4; ++epoch) {
    Workspace loaded;
    load_checkpoint(checkpoints, comm, sum_pipeline_expectation(comm, epoch), loaded);
    EXPECT_EQ(total_of(loaded), kExpectedTotals[static_cast<std::size_t>(epoch - 1)])
        << "epoch " << epoch;
  }
}

TEST(ReferencePipeline, SingleNodeRunsFourEpochsResumesAndLoads) {
  // Every rank runs its own single-node job, in its own directory, at the same time.
  ScratchDir directory;
  check_run_resume_and_load(Communicator::self(), directory.path());
}

TEST(ReferencePipeline, MultiNodeRunsFourEpochsResumesAndLoads) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  check_run_resume_and_load(world, directory.path());
}

TEST(ReferencePipeline, ResumeDoesNotRunInit) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);

  auto job = jobs::make_sum_pipeline();
  bool init_ran = false;
  job.init_group.add("spy", [&](TaskContext&) { init_ran = true; });
  Workspace resumed;
  JobRunner(std::move(job), world, options_for(directory.path(), ResumeRequest::at(2)))
      .run(resumed);
  EXPECT_FALSE(init_ran);
  EXPECT_EQ(total_of(resumed), 145);
}

TEST(ReferencePipeline, LatestResumesFromTheNewestEpochOrStartsFromScratch) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace fresh;
  auto scratch =
      run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::latest()), fresh);
  EXPECT_FALSE(scratch.resumed_from.has_value());
  EXPECT_EQ(total_of(fresh), 145);

  Workspace resumed;
  auto again =
      run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::latest()), resumed);
  EXPECT_EQ(again.resumed_from, 4);
  // Epoch 4 already found the reader exhausted: no epoch is run again (the reference would run a
  // fifth, empty one), and the job goes straight to its download and exit groups.
  EXPECT_EQ(again.last_epoch, 4);
  EXPECT_EQ(again.epochs_run, 0);
  EXPECT_NE(again.stop_reason.find("already at the resumed epoch 4"), std::string::npos)
      << again.stop_reason;
  EXPECT_EQ(total_of(resumed), 145);
}

TEST(ReferencePipeline, ResumingFromAnEpochWithoutCheckpointNamesTheExistingOnes) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace workspace;
  run_sum_pipeline(world, options_for(directory.path()), workspace);
  Workspace other;
  try {
    run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::at(7)), other);
    FAIL() << "expected CheckpointNotFound";
  } catch (const CheckpointNotFound& error) {
    EXPECT_NE(std::string(error.what()).find("committed epochs: 0, 1, 2, 3, 4"), std::string::npos)
        << error.what();
  }
}

TEST(ReferencePipeline, NumEpochsStopsAtThatEpoch) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  auto options = options_for(directory.path());
  options.num_epochs = 2;
  Workspace workspace;
  auto summary = run_sum_pipeline(world, options, workspace);
  EXPECT_EQ(summary.last_epoch, 2);
  EXPECT_EQ(total_of(workspace), 115);
  EXPECT_NE(summary.stop_reason.find("--num-epochs"), std::string::npos);
}

// The reference's test_ckpt_name_and_load_model_from_ckpts, second half.
TEST(ReferencePipeline, PartialLoadFindsEpochsOneToFourButNotFive) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  {
    Workspace workspace;
    JobRunner runner(jobs::make_sum_pipeline(), world, options_for(directory.path()));
    EXPECT_EQ(runner.run(workspace).last_epoch, 4);
    // Every blob init created is checkpointed: 4 per node, 12 in all (the reference counts 12).
    CheckpointReader reader(CheckpointDirectory(directory.path()).file_for(4));
    std::size_t blob_count = 0;
    for (const auto& [node, records] : reader.header().blobs) {
      blob_count += records.size();
    }
    EXPECT_EQ(blob_count, 4u * static_cast<std::size_t>(world.size()));
  }
  // Each rank loads on its own (no collective calls), into an empty workspace.
  JobRunner runner(jobs::make_sum_pipeline(), Communicator::self(), options_for(directory.path()));
  Workspace workspace;
  const std::vector<BlobAddress> model_blobs = {{"trainer_1", "total", "trainer_1_total"},
                                                {"trainer_2", "total", "trainer_2_total"}};
  for (std::int64_t epoch = 1; epoch <= 4; ++epoch) {
    EXPECT_TRUE(runner.load_blobs_from_checkpoints(model_blobs, epoch, workspace));
    for (const auto& address : model_blobs) {
      ASSERT_TRUE(workspace.has(address.as));
      EXPECT_EQ(workspace.get(address.as).as<std::int64_t>()[0],
                kExpectedTotals[static_cast<std::size_t>(epoch - 1)]);
    }
  }
  EXPECT_EQ(workspace.size(), 2u);
  EXPECT_FALSE(runner.load_blobs_from_checkpoints(model_blobs, 5, workspace));
}

TEST(ReferencePipeline, PartialLoadOfAMissingBlobIsAnErrorAndChangesNothing) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace run_workspace;
  run_sum_pipeline(world, options_for(directory.path()), run_workspace);
  CheckpointDirectory checkpoints(directory.path());
  Workspace workspace;
  EXPECT_THROW(
      checkpoints.load_blobs(2, {{"trainer_0", "total", ""}, {"trainer_0", "nope", ""}}, workspace),
      CheckpointError);
  EXPECT_THROW(checkpoints.load_blobs(2, {{"trainer_9", "total", ""}}, workspace), CheckpointError);
  EXPECT_EQ(workspace.size(), 0u);
}

// The reference's test_upload_checkpoint.
TEST(ReferencePipeline, UploadCopiesTheFinalCheckpoint) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  const auto upload_dir = directory / "upload";
  EXPECT_FALSE(std::filesystem::exists(upload_dir / checkpoint_file_name(4)));
  auto options = options_for(directory / "checkpoints");
  options.uploader = make_uploader(upload_dir.string());
  Workspace workspace;
  auto summary = run_sum_pipeline(world, options, workspace);
  EXPECT_EQ(summary.last_epoch, 4);
  ASSERT_TRUE(summary.uploaded_to.has_value());
  EXPECT_EQ(*summary.uploaded_to, (upload_dir / checkpoint_file_name(4)).string());
  if (world.is_root()) {
    EXPECT_EQ(list_directory(upload_dir), (std::vector<std::string>{checkpoint_file_name(4)}));
    EXPECT_EQ(read_file(upload_dir / checkpoint_file_name(4)),
              read_file(directory / "checkpoints" / checkpoint_file_name(4)));
  }
}

TEST(Uploader, UnknownSchemesAreUsageErrors) {
  EXPECT_THROW(make_uploader("s3://bucket/run"), UsageError);
  EXPECT_NO_THROW(make_uploader("file:///tmp/x"));
}

}  // namespace
}  // namespace epochrun::testing
