// The job the README shows under "Writing a job" (examples/minimal/running_mean.cpp, linked
// into this test): the README's code block is that file, and the job runs, checkpoints and
// resumes bit-identically through the registry on real ranks.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "epochrun/job_registry.hpp"
#include "epochrun/job_runner.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The README's code block that starts with the example's first line.
std::string readme_block(const std::string& readme, const std::string& first_line) {
  const auto start = readme.find("```cpp\n" + first_line);
  if (start == std::string::npos) {
    return "";
  }
  const auto body = start + std::string("```cpp\n").size();
  return readme.substr(body, readme.find("```\n", body) - body);
}

TEST(ReadmeJob, TheReadmeShowsTheExampleFileUnderFortyLines) {
  const std::filesystem::path source = EPOCHRUN_SOURCE_DIR;
  const auto example = read_text(source / "examples/minimal/running_mean.cpp");
  ASSERT_FALSE(example.empty());
  const auto first_line = example.substr(0, example.find('\n') + 1);
  EXPECT_EQ(readme_block(read_text(source / "README.md"), first_line), example)
      << "README.md's job example differs from examples/minimal/running_mean.cpp";
  EXPECT_LT(std::count(example.begin(), example.end(), '\n'), 40);
}

// Runs the registered job with `epochs` epochs; returns this rank's totals.
std::vector<double> run_running_mean(const Communicator& comm, std::int64_t epochs,
                                     RunOptions options) {
  JobOptions declared;
  auto make_job = JobRegistry::instance().find("running_mean")->declare(declared);
  for (const auto& option : declared.all()) {
    if (option.key == "epochs") {
      *std::get<std::int64_t*>(option.target) = epochs;
    }
  }
  Workspace workspace;
  JobRunner(make_job(), comm, std::move(options)).run(workspace);
  const auto totals = workspace.get("totals").as<double>();
  return {totals.begin(), totals.end()};
}

TEST(ReadmeJob, ResumesBitIdenticalToAnUninterruptedRun) {
  const auto world = Communicator::world();
  ScratchDir whole(world);
  ScratchDir interrupted(world);
  RunOptions options;
  options.checkpoint_dir = whole.path();
  const auto expected = run_running_mean(world, 5, options);
  EXPECT_EQ(expected[1], 5.0 * 1000 * world.size());

  // Interrupted after two epochs (as --num-epochs 2 stops a run), then resumed.
  options.checkpoint_dir = interrupted.path();
  options.num_epochs = 2;
  EXPECT_EQ(run_running_mean(world, 5, options)[1], 2.0 * 1000 * world.size());
  options.num_epochs.reset();
  options.resume = ResumeRequest::latest();
  const auto resumed = run_running_mean(world, 5, options);
  EXPECT_EQ(resumed, expected);
}

}  // namespace
}  // namespace epochrun::testing
