// `epochrun bench --scale` as a user runs it: its report's shape, and what it shows of the
// protocol. Its timings decide nothing here.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

ProcessResult bench(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                    int ranks = 3) {
  std::vector<std::string> full = {"bench", "--scale"};
  full.insert(full.end(), args.begin(), args.end());
  return run_within(epochrun_on_ranks(ranks, full), cwd, 300);
}

// The MPI calls rank 0 made, but queries, tests of requests and probes (waits, not calls).
std::int64_t calls_made(const nlohmann::json& made) {
  std::int64_t count = 0;
  for (const auto& [call, times] : made.items()) {
    if (call.starts_with("MPI_") && call != "MPI_Comm_rank" && call != "MPI_Comm_size" &&
        call != "MPI_Test" && call != "MPI_Iprobe") {
      count += times.get<std::int64_t>();
    }
  }
  return count;
}

// The save and load rows against their hand-made limits, rank 0's steps with their MPI calls
// and HDF5 file opens, and the one-process lay-out with its metadata. Rank 0's calls in a save are
// collectives only: no point-to-point message per rank, which an agreement that collects one report
// from every rank (as the save's agreements did before) would show as MPI_Recv calls.
TEST(ScaleBench, ReportsTheFixedCostItsStepsAndTheLayOutWithRankZeroMakingNoPointToPointCall) {
  ScratchDir cwd;
  auto result = bench(
      {"--rounds", "5", "--layout-ranks", "1000,2000", "--json", "F", "--dir", "work"}, cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  std::vector<std::string> names;
  for (const auto& row : rows) {
    names.push_back(row.at("name").get<std::string>());
  }
  ASSERT_EQ(names, (std::vector<std::string>{"scale_save", "scale_load", "scale_array_save",
                                             "scale_array_save_seconds",
                                             "scale_array_save_vs_collective_floor", "scale_steps",
                                             "layout_1000", "layout_2000"}));
  for (int i = 0; i < 4; ++i) {
    const auto& row = rows[i];
    EXPECT_TRUE(std::isfinite(row.at("ratio").get<double>()) && row.at("ratio") > 0) << row;
    EXPECT_EQ(row.at("seconds").size(), 5U) << row;
    EXPECT_EQ(row.at("mib_per_rank"), 1.0 / 16) << row;
    EXPECT_EQ(row.at("target"), 3.0) << row;
  }
  // The same saves of the array against the bare collective save of it, in the same rounds.
  const auto& against_floor = rows[4];
  EXPECT_EQ(against_floor.at("seconds"), rows[2].at("seconds")) << against_floor;
  EXPECT_EQ(against_floor.at("limit"), "scale_array_save_collective_floor") << against_floor;
  EXPECT_GT(against_floor.at("limit_median_seconds").get<double>(), 0) << against_floor;
  EXPECT_TRUE(std::isfinite(against_floor.at("ratio").get<double>())) << against_floor;
  EXPECT_EQ(against_floor.at("target"), 1.25) << against_floor;
  const auto& steps = rows[5];
  std::vector<std::string> save_steps;
  for (const auto& step : steps.at("save").at("steps")) {
    save_steps.push_back(step.at("step").get<std::string>());
    EXPECT_GE(step.at("median_seconds").get<double>(), 0) << step;
  }
  for (const char* step : {"describe", "lay out", "write data", "write (agree)", "commit"}) {
    EXPECT_NE(std::find(save_steps.begin(), save_steps.end(), step), save_steps.end())
        << step << " not among " << steps.at("save").dump();
  }
  const auto& calls = steps.at("save").at("rank0_mpi_calls");
  EXPECT_TRUE(calls.contains("MPI_Iallreduce")) << calls;
  for (const char* point_to_point : {"MPI_Recv", "MPI_Isend", "MPI_Send"}) {
    EXPECT_FALSE(calls.contains(point_to_point)) << calls;
  }
  // Four collectives a save of per-node blobs of one shape: the describe step's reduction (with
  // the blob count and the hashes of their declarations and shapes), the lay-out's broadcast
  // (with the layout and the temporary name), the write's reduction and the commit's
  // broadcast. (Eight before the count, the hashes, the layout and the name travelled in the
  // agreements.) Tests of requests and probes are waits, not calls.
  EXPECT_EQ(calls_made(calls), 4) << calls;
  // The last round's lay-out replays the bytes HDF5 laid out for the same blobs at an earlier
  // epoch, with the epoch changed: no HDF5 file is created.
  EXPECT_FALSE(calls.contains("H5Fcreate")) << calls;
  // A global array split as heat_diffusion splits its field (bands of whole rows at 3 ranks) on
  // this local file system: each rank writes its band itself in the data step, so the save makes
  // the same four collectives as one of per-node blobs, and opens no file with MPI-IO (before: a
  // collective open, write, sync and close, and four agreements of their own).
  const auto& array_calls = steps.at("array save").at("rank0_mpi_calls");
  EXPECT_FALSE(array_calls.contains("MPI_File_open")) << array_calls;
  EXPECT_EQ(calls_made(array_calls), 4) << array_calls;
  EXPECT_TRUE(steps.at("hand-made save").at("rank0_mpi_calls").contains("MPI_Gather"));
  // The floor is the collective MPI-IO write itself, even for bands.
  EXPECT_EQ(steps.at("collective floor array save").at("rank0_mpi_calls").value("MPI_File_open", 0),
            1);
  // Its steps, named as the save's own collective write names them, so that the two read side
  // by side: what the save adds is in the steps the floor does not have.
  std::vector<std::string> floor_steps;
  for (const auto& step : steps.at("collective floor array save").at("steps")) {
    floor_steps.push_back(step.at("step").get<std::string>());
  }
  EXPECT_EQ(floor_steps, (std::vector<std::string>{"create", "open", "collective write",
                                                   "sync and close", "commit"}))
      << steps.at("collective floor array save").dump();
  // A load's rank 0 reads the layout from the file's layout record: it opens no file with HDF5
  // (which it did, once per load, before the record). Its collectives: the broadcast of its
  // step's outcome, which carries a small layout too, and the reduction after every rank read
  // its values (7 before).
  const auto& load_calls = steps.at("load").at("rank0_mpi_calls");
  EXPECT_FALSE(load_calls.contains("H5Fopen")) << load_calls;
  EXPECT_EQ(load_calls.value("MPI_Ibcast", 0), 1) << load_calls;
  EXPECT_EQ(load_calls.value("MPI_Iallreduce", 0), 1) << load_calls;
  EXPECT_FALSE(load_calls.contains("MPI_Bcast")) << load_calls;
  for (int i = 6; i < 8; ++i) {
    const auto& row = rows[i];
    EXPECT_GT(row.at("metadata_bytes").get<double>(), 0) << row;
    EXPECT_GT(row.at("seconds").get<double>(), 0) << row;
    EXPECT_TRUE(row.at("met").is_boolean()) << row;
  }
  // Twice the ranks, about twice the metadata (node names, checksums): per 1,000 ranks the same.
  const double per_thousand_1000 = rows[6].at("metadata_bytes_per_1000_ranks");
  const double per_thousand_2000 = rows[7].at("metadata_bytes_per_1000_ranks");
  EXPECT_LT(per_thousand_2000, 1.2 * per_thousand_1000);
  EXPECT_NE(result.out.find("lay-out for    1000 ranks x 10 blobs"), std::string::npos)
      << result.out;
}

// At 4 ranks the global array is split in a 2 x 2 grid, interleaved blocks, which take the
// collective MPI-IO write. Under ROMIO, loaded by the bench's earlier rounds, it makes no
// agreement of its own: the open, the writes, the checksums written beside them, the sync and
// the close follow one another, and finish()'s agreement is the save's own. So the two
// reductions (describe, write) and the two broadcasts of every save. (Before: three reductions,
// one after the open; before that eight, an agreement after each of the open, the fault check,
// the block check, the write, the sync and the checksums.)
TEST(ScaleBench, AnArrayOfInterleavedBlocksAddsOnlyTheCollectiveOpen) {
  ScratchDir cwd;
  auto result = bench({"--rounds", "5", "--layout-ranks", "none", "--json", "F", "--dir", "work"},
                      cwd.path(), 4);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  const auto& calls = rows.at(5).at("array save").at("rank0_mpi_calls");
  EXPECT_EQ(calls.value("MPI_File_open", 0), 1) << calls;
  EXPECT_EQ(calls.value("MPI_Iallreduce", 0), 2) << calls;
  EXPECT_EQ(calls.value("MPI_Ibcast", 0), 2) << calls;
  for (const char* point_to_point : {"MPI_Recv", "MPI_Isend", "MPI_Send", "MPI_Allreduce"}) {
    EXPECT_FALSE(calls.contains(point_to_point)) << calls;
  }
}

TEST(ScaleBench, BadFlagsExitTwoWithOneLine) {
  ScratchDir cwd;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--layout-ranks", "1000,x"},
        std::vector<std::string>{"--layout-ranks", "0"}, std::vector<std::string>{"--targets"},
        std::vector<std::string>{"--global-arrays"}, std::vector<std::string>{"--blobs", "2"},
        std::vector<std::string>{"--layout-blobs", "0"}}) {
    auto result = bench(args, cwd.path());
    EXPECT_EQ(result.exit_code, 2) << args[0] << "\n" << result.err;
    EXPECT_EQ(error_lines(result).size(), 1U) << args[0] << "\n" << result.err;
  }
  EXPECT_TRUE(list_directory(cwd.path()).empty());
}

}  // namespace
}  // namespace epochrun::testing
