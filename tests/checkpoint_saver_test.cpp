// CheckpointSaver's saves of a global array, in the test's own MPI processes: at
// MPI_THREAD_MULTIPLE (what MpiSession asks for and Open MPI gives) the background thread writes
// the array with its collective MPI-IO write, while the job's thread goes on; the commit at the
// next boundary then only renames. The poll for the written bytes is bounded; the job's thread
// makes no MPI call meanwhile, so the collective write cannot be waiting for it. Once a save is
// durable, the array's bytes are out of the page cache, synchronous or not.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "checkpoint_saver.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "file_system_kind.hpp"
#include "mpi_thread_level.hpp"
#include "post_commit_steps.hpp"
#include "regular_file.hpp"
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

// A saver of one global array, "field", each rank's block 64 rows of 1024 float64 holding a value
// of its own (found nowhere else in the file).
struct FieldSaver {
  explicit FieldSaver(bool async, ArrayIo array_io = ArrayIo::kAuto) {
    options.checkpoint_dir = directory / "ck";
    options.async_checkpoint = async;
    options.arrays.path = array_io;
    post_commit.emplace(world, options, "saver_job");
    std::vector<std::string> nodes;
    std::vector<Block> blocks;
    for (std::uint64_t r = 0; r < ranks; ++r) {
      nodes.push_back("node_" + std::to_string(r));
      blocks.push_back(Block{{r * kRowsPerRank, 0}, {kRowsPerRank, kColumns}});
    }
    saver.emplace("saver_job", world, options, nodes, *post_commit);
    saver->set_blobs(
        {BlobPlan{"field", StorageKind::kGlobalArray, Shape{ranks * kRowsPerRank, kColumns},
                  std::make_shared<const std::vector<Block>>(blocks)}});
    std::vector<double> values(kRowsPerRank * kColumns, 1000.25 + static_cast<double>(rank));
    workspace.put("field", Blob::of<double>({kRowsPerRank, kColumns}, values));
    block.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  }

  const Communicator world = Communicator::world();
  const std::uint64_t ranks = static_cast<std::uint64_t>(world.size());
  const std::uint64_t rank = static_cast<std::uint64_t>(world.rank());
  ScratchDir directory{world};
  CheckpointOptions options;
  std::optional<PostCommitSteps> post_commit;
  std::optional<CheckpointSaver> saver;
  Workspace workspace;
  std::string block;  // this rank's block's bytes
};

// How many of `file`'s pages are in the page cache (mincore over a mapping of it).
std::size_t resident_pages(const std::filesystem::path& file) {
  const auto fd = open_regular_file_for_reading(file);
  const auto bytes = static_cast<std::size_t>(file_size(fd.get()));
  void* mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (mapped == MAP_FAILED) {
    ADD_FAILURE() << "mmap " << file;
    return 0;
  }
  const std::size_t page = 4096;
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(mapped, bytes, in_core.data()), 0);
  ::munmap(mapped, bytes);
  return static_cast<std::size_t>(std::count_if(in_core.begin(), in_core.end(),
                                                [](unsigned char in) { return (in & 1) != 0; }));
}

TEST(CheckpointSaver, AnAsynchronousSaveWritesItsGlobalArrayBeforeTheJobAsksForTheCommit) {
  ASSERT_TRUE(mpi_calls_from_any_thread()) << "MpiSession initialises MPI at MULTIPLE";
  FieldSaver s(true);
  const auto started = s.saver->save(1, s.workspace, true);
  ASSERT_TRUE(started.in_background) << started.log;
  bool written = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!written && std::chrono::steady_clock::now() < give_up) {
    written = some_file_holds(s.options.checkpoint_dir, s.block);
    if (!written) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(written) << "rank " << s.rank
                       << "'s block was not in the checkpoint directory after 60 s: the "
                          "collective write waits for the commit";
  const auto completed = s.saver->complete();
  ASSERT_TRUE(completed.has_value());
  EXPECT_TRUE(completed->committed) << completed->log;
  EXPECT_EQ(s.saver->last_committed(), 1);
}

// Each rank drops the bytes it wrote of a global array from the page cache once they are
// durable: the next save then reuses those pages, warm, rather than taking fresh ones
// (MpiIoFile::sync_and_close on the collective path, the data step on the direct one). Of the
// file's pages only the metadata's may stay. The drop is a hint the kernel may pass over: here
// 9 saves of 1,440 kept one rank's whole block cached after its fsync and drop (a second drop at
// once did no better), and never two saves in a row. So each path saves three times and its
// best save is judged: a path that never drops keeps every block of every save.
TEST(CheckpointSaver, ADurableSaveLeavesItsGlobalArrayOutOfThePageCache) {
  for (const bool async : {false, true}) {
    for (const auto array_io : {ArrayIo::kDirect, ArrayIo::kMpiIo}) {
      SCOPED_TRACE(async ? "asynchronous" : "synchronous");
      SCOPED_TRACE(std::string("--array-io ") + std::string(array_io_name(array_io)));
      FieldSaver s(async, array_io);
      if (file_system_kind(s.options.checkpoint_dir).name == "tmpfs") {
        GTEST_SKIP() << "tmpfs keeps every page: " << s.options.checkpoint_dir;
      }
      const auto array_pages = s.ranks * kRowsPerRank * kColumns * sizeof(double) / 4096;
      std::vector<std::size_t> resident;
      for (const std::int64_t epoch : {2, 3, 4}) {
        const auto started = s.saver->save(epoch, s.workspace, true);
        if (started.in_background) {
          const auto completed = s.saver->complete();
          ASSERT_TRUE(completed && completed->committed);
        } else {
          ASSERT_TRUE(started.committed) << started.log;
        }
        if (s.world.is_root()) {
          resident.push_back(
              resident_pages(CheckpointDirectory(s.options.checkpoint_dir).file_for(epoch)));
        }
        s.world.barrier();
      }
      if (s.world.is_root()) {
        EXPECT_LT(*std::min_element(resident.begin(), resident.end()), array_pages / 8)
            << "pages cached after each of 3 saves: " << ::testing::PrintToString(resident)
            << ", of the array's " << array_pages;
      }
    }
  }
}

}  // namespace
}  // namespace epochrun::testing
