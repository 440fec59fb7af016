// Version 3 checkpoints saved and loaded collectively on 3 ranks: per-node blobs of one shape
// and of different shapes, small ones packed, a replicated blob and a 2-D global array, read
// back bit-identical at 3 ranks and re-partitioned at 2; a resume at another rank count without
// a rule for a per-node blob is refused naming it; a damaged byte of the array is found at any
// rank count; each way of writing the array (each rank its rows directly, one collective MPI-IO
// write) makes the same file; the layout record a load reads instead of HDF5 says what the HDF5
// metadata says, and a file without one (written before it) still loads; a rank failing in the data
// step or inside the collective write fails the save on every rank and leaves no file. (ctest sets
// EPOCHRUN_FAULT for epochs 8 and 9.)
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <thread>

#include "array_path.hpp"
#include "checkpoint_load_v3.hpp"
#include "checkpoint_reader_v3.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"
#include "file_system_kind.hpp"
#include "mpi_io_file.hpp"
#include "pending_checkpoint_v3.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"
#include "stored_file_codec.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::chrono::seconds kTimeout{60};
const Shape kField{7, 5};

// The field's value at a global cell: its row-major index.
double cell(std::uint64_t row, std::uint64_t column) {
  return static_cast<double>(row * kField[1] + column);
}

Blob block_of_field(const Block& block) {
  std::vector<double> values;
  for (auto r = block.start[0]; r < block.start[0] + block.count[0]; ++r) {
    for (auto c = block.start[1]; c < block.start[1] + block.count[1]; ++c) {
      values.push_back(cell(r, c));
    }
  }
  return Blob::of<double>(block.count, values);
}

std::vector<Block> blocks_for(int ranks) {
  std::vector<Block> blocks;
  for (int rank = 0; rank < ranks; ++rank) {
    blocks.push_back(balanced_block(kField, ranks, rank));
  }
  return blocks;
}

// What rank `rank` saves: its per-node values, the replicated model, its block of the field.
Workspace workspace_of(int rank, int ranks) {
  Workspace workspace;
  workspace.put("weights", Blob::of<double>({300}, std::vector<double>(300, 1.5 * rank)));
  std::vector<std::int64_t> samples(static_cast<std::size_t>(rank) + 1);
  std::iota(samples.begin(), samples.end(), 10 * rank);
  workspace.put("samples", Blob::of<std::int64_t>({samples.size()}, samples));
  for (int i = 0; i < 40; ++i) {
    workspace.put(
        "small_" + std::to_string(100 + i),
        Blob::of<std::uint8_t>({3}, std::vector<std::uint8_t>{static_cast<std::uint8_t>(rank),
                                                              static_cast<std::uint8_t>(i), 7}));
  }
  workspace.put("model", Blob::of<float>({2, 2}, std::vector<float>{1, 2, 3, 4}));
  workspace.put("field", block_of_field(balanced_block(kField, ranks, rank)));
  return workspace;
}

std::vector<SavedBlob> saved_blobs(const Workspace& workspace, int ranks) {
  auto blocks = std::make_shared<const std::vector<Block>>(blocks_for(ranks));
  std::vector<SavedBlob> saved;
  for (const auto& [name, blob] : workspace.blobs()) {
    SavedBlob one{BlobView{name, blob.dtype(), blob.shape(), blob.raw(), {}, false, {}},
                  StorageKind::kPerNode,
                  {},
                  {}};
    if (name == "model") {
      one.kind = StorageKind::kReplicated;
    } else if (name == "field") {
      one.kind = StorageKind::kGlobalArray;
      one.global_shape = kField;
      one.blocks = blocks;
    }
    saved.push_back(std::move(one));
  }
  return saved;
}

SavedFile root_for(std::int64_t epoch, int ranks) {
  SavedFile root{epoch, "v3_job", {}, "{}"};
  for (int rank = 0; rank < ranks; ++rank) {
    root.node_names.push_back("trainer_" + std::to_string(rank));
  }
  return root;
}

// The layout of the checkpoint `file`, as a reader trusting its HDF5 metadata finds it.
StoredFileV3 layout_of(const std::filesystem::path& file) {
  const FileDescriptor fd(::open(file.c_str(), O_RDONLY));
  return read_checkpoint_layout_v3(fd.get(), verify_checkpoint_file(fd.get(), "t"));
}

// The file's byte at `offset` changed, as a failing disk would change it.
void damage_byte(const std::filesystem::path& file, std::uint64_t offset) {
  const FileDescriptor fd(::open(file.c_str(), O_RDWR));
  const char damaged = 0x5a;
  ASSERT_EQ(::pwrite(fd.get(), &damaged, 1, static_cast<off_t>(offset)), 1);
}

// The first `ranks` ranks of `world` as a communicator of their own (nullopt on the others).
std::optional<Communicator> first_ranks(const Communicator& world, int ranks) {
  return world.split(world.rank() < ranks ? 0 : Communicator::kNoColor);
}

class CheckpointV3Test : public ::testing::Test {
 protected:
  void SetUp() override { arm_fault_points(world.rank()); }

  // Saves epoch `epoch` from every rank into `into`, the data step on another thread as an async
  // save does, the field written as `array_io` says; returns the path it took.
  ArrayPath save(std::int64_t epoch, ArrayIo array_io = ArrayIo::kAuto,
                 const std::filesystem::path& into = {}) {
    const auto workspace = workspace_of(world.rank(), world.size());
    auto pending = PendingCheckpointV3::begin(
        into.empty() ? file : into, world, root_for(epoch, world.size()),
        saved_blobs(workspace, world.size()), kTimeout, ArrayIoOptions{array_io, {}});
    std::thread writer([&] { pending.write_data(); });
    writer.join();
    pending.write_arrays();
    pending.finish();
    EXPECT_EQ(pending.array_paths().size(), 1U);
    return pending.array_paths().at(0).second;
  }

  LoadRequest request(std::int64_t epoch, int ranks) const {
    LoadRequest wanted{epoch, "v3_job", root_for(epoch, ranks).node_names, {}, {}, {}, {}};
    wanted.array_blocks["field"] = blocks_for(ranks);
    return wanted;
  }

  const Communicator world = Communicator::world();
  ScratchDir directory{world};
  const std::filesystem::path file = directory / "v3.h5";
};

TEST_F(CheckpointV3Test, LoadsBitIdenticalAtTheSameRankCount) {
  ASSERT_EQ(world.size(), 3);
  save(4);
  Workspace loaded;
  const auto result = load_checkpoint_v3(file, world, request(4, 3), loaded, kTimeout);
  EXPECT_EQ(result.written_by_ranks, 3);
  const auto expected = workspace_of(world.rank(), 3);
  EXPECT_EQ(loaded.names(), expected.names());
  for (const auto& [name, blob] : expected.blobs()) {
    EXPECT_TRUE(loaded.get(name) == blob) << name;
  }
}

TEST_F(CheckpointV3Test, ReplicatedAndGlobalArraysLoadAtTwoRanksWithRulesForPerNodeBlobs) {
  save(5);
  const auto two = first_ranks(world, 2);
  if (!two) {
    return;
  }
  const Communicator& comm = *two;
  auto wanted = request(5, 2);
  // weights: every new rank takes the sum of the old values; the rest is created anew.
  wanted.per_node_rules["weights"] = PerNodeRule{true, [](const std::vector<Blob>& old, int, int) {
                                                   std::vector<double> sum(300, 0.0);
                                                   for (const auto& value : old) {
                                                     for (std::size_t i = 0; i < sum.size(); ++i) {
                                                       sum[i] += value.as<double>()[i];
                                                     }
                                                   }
                                                   return Blob::of<double>({300}, sum);
                                                 }};
  wanted.per_node_rules["samples"] = PerNodeRule{false, {}};
  for (int i = 0; i < 40; ++i) {
    wanted.per_node_rules["small_" + std::to_string(100 + i)] = PerNodeRule{false, {}};
  }
  Workspace loaded;
  const auto result = load_checkpoint_v3(file, comm, wanted, loaded, kTimeout);
  EXPECT_EQ(result.written_by_ranks, 3);
  EXPECT_EQ(result.recreated.size(), 41U);
  EXPECT_TRUE(loaded.get("field") == block_of_field(balanced_block(kField, 2, comm.rank())));
  EXPECT_TRUE(loaded.get("model") == workspace_of(0, 3).get("model"));
  EXPECT_EQ(loaded.get("weights").as<double>()[17], 1.5 * (0 + 1 + 2));
  EXPECT_FALSE(loaded.has("samples"));
}

TEST_F(CheckpointV3Test, AnotherRankCountWithoutARuleIsRefusedNamingTheBlobs) {
  save(6);
  const auto two = first_ranks(world, 2);
  if (!two) {
    return;
  }
  Workspace loaded;
  try {
    load_checkpoint_v3(file, *two, request(6, 2), loaded, kTimeout);
    FAIL() << "loaded at 2 ranks without rules";
  } catch (const CheckpointMismatch& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'samples'"), std::string::npos) << message;
    EXPECT_NE(message.find("'weights'"), std::string::npos) << message;
    EXPECT_EQ(message.find("'model'"), std::string::npos) << message;
    EXPECT_EQ(message.find("'field'"), std::string::npos) << message;
  }
  EXPECT_TRUE(loaded.names().empty());
}

TEST_F(CheckpointV3Test, ADamagedByteOfTheArrayIsFoundAtEveryRankCount) {
  save(7);
  if (world.is_root()) {
    // A byte in the middle of the field's data: found through its dataset's offset.
    const auto stored = layout_of(file);
    const auto field = find_blob_v3(stored, "field", StorageKind::kGlobalArray).value();
    damage_byte(file, stored.layout.offsets[field] + 8 * 17 + 3);
  }
  world.barrier();
  Workspace loaded;
  EXPECT_THROW(load_checkpoint_v3(file, world, request(7, 3), loaded, kTimeout), CorruptCheckpoint);
  if (const auto two = first_ranks(world, 2)) {
    auto wanted = request(7, 2);
    wanted.per_node_rules = {{"weights", {false, {}}}, {"samples", {false, {}}}};
    for (int i = 0; i < 40; ++i) {
      wanted.per_node_rules["small_" + std::to_string(100 + i)] = PerNodeRule{false, {}};
    }
    EXPECT_THROW(load_checkpoint_v3(file, *two, wanted, loaded, kTimeout), CorruptCheckpoint);
  }
  EXPECT_TRUE(loaded.names().empty());
}

// The read system calls (read, pread, readv, preadv) this thread has made so far, as the kernel
// counts them.
std::int64_t reads_by_this_thread() {
  std::ifstream io("/proc/thread-self/io");
  for (std::string key; io >> key;) {
    std::int64_t value = 0;
    io >> value;
    if (key == "syscr:") {
      return value;
    }
  }
  ADD_FAILURE() << "no syscr in /proc/thread-self/io";
  return -1;
}

// A rank's 40 packed small blobs lie side by side in its row of the pack: the load reads them in
// one call, not one call each (10,000 small blobs took 5 times as long as the same bytes in one
// blob when each was its own pread).
TEST_F(CheckpointV3Test, ARanksPackedSmallBlobsAreReadInOneCall) {
  save(10);
  Workspace loaded;
  const auto before = reads_by_this_thread();
  load_checkpoint_v3(file, world, request(10, 3), loaded, kTimeout);
  const auto reads = reads_by_this_thread() - before;
  EXPECT_TRUE(loaded.get("small_117") == workspace_of(world.rank(), 3).get("small_117"));
  // Besides the pack: weights, samples and model, and on rank 0 the layout (the integrity
  // header and its record, the checksums).
  EXPECT_LE(reads, 12) << "read calls on rank " << world.rank();
}

// A damaged byte of one packed blob fails the load, naming that blob and the rank whose value it
// is, though the pack is read in one call.
TEST_F(CheckpointV3Test, ADamagedPackedBlobIsNamed) {
  save(11);
  if (world.is_root()) {
    const auto stored = layout_of(file);
    const auto value =
        stored_value(stored, find_blob_v3(stored, "small_117", StorageKind::kPerNode).value(), 1);
    ASSERT_TRUE(value.packed);
    damage_byte(file, value.offset + 1);
  }
  world.barrier();
  Workspace loaded;
  try {
    load_checkpoint_v3(file, world, request(11, 3), loaded, kTimeout);
    FAIL() << "loaded a damaged pack";
  } catch (const CorruptCheckpoint& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/nodes/small_117[1] (trainer_1): checksum mismatch"), std::string::npos)
        << message;
  }
  EXPECT_TRUE(loaded.names().empty());
}

// --check-replicated: a replicated blob that differs on one rank fails the save on every rank,
// naming it, before anything is written; without the check the save goes through (rank 0's
// value is what the file holds).
TEST_F(CheckpointV3Test, CheckReplicatedRefusesReplicasThatDiffer) {
  auto workspace = workspace_of(world.rank(), world.size());
  if (world.rank() == 2) {
    workspace.get("model").as<float>()[3] = 5.0F;
  }
  try {
    PendingCheckpointV3::begin(file, world, root_for(10, world.size()),
                               saved_blobs(workspace, world.size()), kTimeout, {}, true);
    FAIL() << "replicas that differ were saved";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("'model'"), std::string::npos) << error.what();
  }
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
  auto pending = PendingCheckpointV3::begin(file, world, root_for(10, world.size()),
                                            saved_blobs(workspace, world.size()), kTimeout);
  pending.write_data();
  pending.write_arrays();
  pending.finish();
  Workspace loaded;
  load_checkpoint_v3(file, world, request(10, world.size()), loaded, kTimeout);
  EXPECT_EQ(loaded.get("model").as<float>()[3], 4.0F);
}

// EPOCHRUN_FAULT=save-write@8:2:THROW: rank 2 fails after writing its data.
TEST_F(CheckpointV3Test, ARankFailingInTheDataStepFailsTheSaveEverywhereAndLeavesNoFile) {
  EXPECT_THROW(save(8), Error);
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
}

// EPOCHRUN_FAULT=save-write-array@9:1:THROW: rank 1 fails on its way into the collective write
// of the global array (the others are in it already): the agreement after the write ends it on
// every rank within the timeout, not by a hang.
TEST_F(CheckpointV3Test, ARankFailingAtTheCollectiveWriteFailsTheSaveEverywhere) {
  EXPECT_THROW(save(9, ArrayIo::kMpiIo), Error);
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
}

// The same fault on the direct path: rank 1 fails before it writes its block in the data step,
// and the save fails on every rank at the agreement that ends it.
TEST_F(CheckpointV3Test, ARankFailingAtTheDirectWriteOfItsBlockFailsTheSaveEverywhere) {
  EXPECT_THROW(save(9, ArrayIo::kDirect), Error);
  world.barrier();
  EXPECT_FALSE(std::filesystem::exists(file));
}

// A collective open that fails on one rank fails on every rank under ROMIO (epochrun selects it):
// once this process has opened a file with ROMIO and no other MPI-IO component, the collective
// write of a global array follows the lay-out with no agreement of its own, and the save's
// reductions are the describe step's and the write's. Under another MPI-IO component
// (checkpoint_v3_ompio_tests runs this under OMPIO), and before the first open, an agreement
// follows the open, so that a rank that could not open stops the save everywhere before any rank
// writes.
TEST_F(CheckpointV3Test, TheCollectiveWriteAgreesAfterItsOpenOnlyWhereMpiIoDoesNotItself) {
  const char* chosen = std::getenv("OMPI_MCA_io");
  const bool romio = chosen != nullptr && std::string(chosen) == "romio321";
  EXPECT_EQ(save(20, ArrayIo::kMpiIo), ArrayPath::kMpiIo);  // MPI-IO's component loaded now
  EXPECT_EQ(MpiIoFile::failed_open_fails_everywhere(), romio) << chosen;
  step_times::record_on_this_thread(true);
  EXPECT_EQ(save(21, ArrayIo::kMpiIo, directory / "second.h5"), ArrayPath::kMpiIo);
  std::int64_t reductions = 0;
  for (const auto& [call, count] : step_times::take_calls()) {
    reductions += call == "MPI_Iallreduce" ? count : 0;
  }
  std::vector<std::string> steps;
  for (const auto& [step, seconds] : step_times::take()) {
    steps.push_back(step);
  }
  step_times::record_on_this_thread(false);
  EXPECT_EQ(reductions, romio ? 2 : 3);
  EXPECT_NE(std::find(steps.begin(), steps.end(), "open for collective writes"), steps.end());
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "open for collective writes (agree)"),
            romio ? 0 : 1);
  Workspace loaded;
  load_checkpoint_v3(directory / "second.h5", world, request(21, world.size()), loaded, kTimeout);
  EXPECT_TRUE(loaded.get("field") == workspace_of(world.rank(), world.size()).get("field"));
}

// The field's blocks at 3 ranks are bands of whole rows: the direct path writes them, each rank
// its own, and the file is the one the collective MPI-IO write makes, to the byte (the data, the
// checksums, the layout, the header), however much later it is written: HDF5 stamps no object
// with a time. `auto` takes the direct path exactly where the file system is a local ext4 or XFS.
TEST_F(CheckpointV3Test, EachArrayPathWritesTheSameFileByteForByte) {
  ASSERT_EQ(world.size(), 3);
  const auto by_mpiio = directory / "mpiio.h5";
  EXPECT_EQ(save(6, ArrayIo::kDirect), ArrayPath::kDirect);
  // Into another second of the clock (object times have a resolution of one second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(save(6, ArrayIo::kMpiIo, by_mpiio), ArrayPath::kMpiIo);
  world.barrier();
  if (world.is_root()) {
    EXPECT_TRUE(read_file(file) == read_file(by_mpiio)) << "the files differ";
  }
  const bool safe = direct_writes_safe(file_system_kind(directory.path()));
  EXPECT_EQ(save(6, ArrayIo::kAuto, directory / "auto.h5"),
            safe ? ArrayPath::kDirect : ArrayPath::kMpiIo);
  Workspace loaded;
  load_checkpoint_v3(file, world, request(6, 3), loaded, kTimeout);
  EXPECT_TRUE(loaded.get("field") == workspace_of(world.rank(), 3).get("field"));
}

// A 2-D grid of blocks (4 ranks of the field as 2 x 2) interleaves them: even asked for the direct
// path, the field takes the collective write.
TEST(ArrayPath, InterleavedBlocksTakeTheCollectiveWrite) {
  const Shape field{8, 6};
  std::vector<Block> grid;
  std::vector<Block> bands;
  for (int rank = 0; rank < 4; ++rank) {
    grid.push_back(grid_block(field, {2, 2}, rank));
    bands.push_back(grid_block(field, {4, 1}, rank));
  }
  EXPECT_EQ(choose_array_path(ArrayIo::kDirect, field, grid, true), ArrayPath::kMpiIo);
  EXPECT_EQ(choose_array_path(ArrayIo::kAuto, field, grid, true), ArrayPath::kMpiIo);
  EXPECT_EQ(choose_array_path(ArrayIo::kDirect, field, bands, false), ArrayPath::kDirect);
  EXPECT_EQ(choose_array_path(ArrayIo::kAuto, field, bands, true), ArrayPath::kDirect);
  EXPECT_EQ(choose_array_path(ArrayIo::kAuto, field, bands, false), ArrayPath::kMpiIo);
  EXPECT_EQ(choose_array_path(ArrayIo::kMpiIo, field, bands, true), ArrayPath::kMpiIo);
  // Row-major runs: a band of whole rows, one row's part, one plane of a 3-D array.
  EXPECT_EQ(contiguous_start(field, Block{{2, 0}, {3, 6}}), std::optional<std::uint64_t>(12));
  EXPECT_EQ(contiguous_start(field, Block{{5, 1}, {1, 4}}), std::optional<std::uint64_t>(31));
  EXPECT_EQ(contiguous_start(field, Block{{2, 1}, {2, 4}}), std::nullopt);
  EXPECT_EQ(contiguous_start(Shape{4, 3, 2}, Block{{1, 1, 0}, {1, 2, 2}}),
            std::optional<std::uint64_t>(8));
  EXPECT_EQ(contiguous_start(Shape{4, 3, 2}, Block{{1, 1, 0}, {2, 2, 2}}), std::nullopt);
  EXPECT_EQ(contiguous_start(field, Block{{0, 0}, {0, 6}}), std::optional<std::uint64_t>(0));
  EXPECT_FALSE(direct_writes_safe(FileSystemKind{"tmpfs", true}));
  EXPECT_FALSE(direct_writes_safe(FileSystemKind{"fuse", false}));
  EXPECT_FALSE(direct_writes_safe(FileSystemKind{"nfs", false}));
  EXPECT_TRUE(direct_writes_safe(FileSystemKind{"xfs", true}));
}

// Rank 0 (the one process that reads the file's metadata) changes its user block: `change`
// gets the header as written and returns the one to write back.
template <typename Change>
void rewrite_header_on_root(const Communicator& world, const std::filesystem::path& file,
                            Change&& change) {
  if (world.is_root()) {
    FileDescriptor fd(::open(file.c_str(), O_RDWR));
    auto header = change(verify_checkpoint_file(fd.get(), "t"));
    write_at(fd.get(), 0, encode_integrity_header(header), "t");
  }
  world.barrier();
}

// The layout record (docs/FORMAT.md): the layout a load reads with two preads instead of an HDF5
// open is the one the HDF5 metadata describes, to the last offset, checksum and ragged row.
TEST_F(CheckpointV3Test, TheLayoutRecordSaysWhatTheHdf5MetadataSays) {
  save(11);
  if (world.is_root()) {
    FileDescriptor fd(::open(file.c_str(), O_RDONLY));
    const auto integrity = verify_checkpoint_file(fd.get(), "t");
    ASSERT_FALSE(integrity.layout_record.empty());
    const auto from_record = read_checkpoint_layout_from_record(fd.get(), integrity);
    const auto from_hdf5 = read_checkpoint_layout_v3(fd.get(), integrity);
    EXPECT_EQ(encode_stored_file(from_record), encode_stored_file(from_hdf5));
    EXPECT_EQ(from_record.ragged.size(), 1U);  // samples
    EXPECT_EQ(from_record.checksums.size(), 3U * 42 + 1 + 3);
    // Too large to travel in the load's first broadcast (RootLayout::kCarriedWords): this
    // file's loads send it in a broadcast of its own, a small job's (the scale bench's) not.
    EXPECT_GT(encode_stored_file(from_record).size(), 8 * (RootLayout::kCarriedWords - 1));
  }
}

// A crafted record can carry a valid checksum: whatever a changed byte makes it say, the reader
// refuses it as a damaged checkpoint or reads a layout it checked, and never reads outside the
// file, allocates what the file cannot hold, or fails otherwise.
TEST_F(CheckpointV3Test, EveryChangedByteOfALayoutRecordIsCheckedByItsReader) {
  save(14);
  if (!world.is_root()) {
    return;
  }
  FileDescriptor fd(::open(file.c_str(), O_RDONLY));
  const auto integrity = verify_checkpoint_file(fd.get(), "t");
  int refused = 0;
  for (std::size_t at = 0; at < integrity.layout_record.size(); ++at) {
    for (const auto change : {0x01, 0x80, 0xff}) {
      auto crafted = integrity;
      crafted.layout_record[at] ^= static_cast<std::byte>(change);
      try {
        (void)read_checkpoint_layout_from_record(fd.get(), crafted);
      } catch (const CheckpointError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

// A record that moves the replicated blob's dataset by 8 bytes is refused, naming it: each blob's
// bytes must be one of the header's extents, looked up among them sorted.
TEST_F(CheckpointV3Test, ARecordPlacingABlobOffItsExtentIsRefusedNamingIt) {
  save(15);
  if (!world.is_root()) {
    return;
  }
  FileDescriptor fd(::open(file.c_str(), O_RDONLY));
  auto crafted = verify_checkpoint_file(fd.get(), "t");
  EXPECT_NO_THROW((void)read_checkpoint_layout_from_record(fd.get(), crafted));
  auto forged = decode_layout_record(crafted.layout_record);
  forged.layout.offsets[find_blob_v3(forged, "model", StorageKind::kReplicated).value()] += 8;
  crafted.layout_record = layout_record_for(forged.description, forged.layout);
  try {
    (void)read_checkpoint_layout_from_record(fd.get(), crafted);
    FAIL() << "a blob off its extent was taken";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("places blob 'model' outside the data extents"),
              std::string::npos)
        << error.what();
  }
}

// A file written before the layout record (none in its user block) loads as it did: rank 0
// reads its layout with HDF5, once its metadata hash is checked.
TEST_F(CheckpointV3Test, AFileWithoutALayoutRecordStillLoads) {
  save(12);
  rewrite_header_on_root(world, file, [](IntegrityHeader header) {
    header.layout_record.clear();
    return header;
  });
  Workspace loaded;
  load_checkpoint_v3(file, world, request(12, 3), loaded, kTimeout);
  const auto expected = workspace_of(world.rank(), 3);
  for (const auto& [name, blob] : expected.blobs()) {
    EXPECT_TRUE(loaded.get(name) == blob) << name;
  }
}

// A damaged record fails the load as a damaged file; a record that disagrees with the HDF5
// metadata under a valid checksum of its own (made by hand) is found by every reader of the
// HDF5 side (inspect --verify, CheckpointReader).
TEST_F(CheckpointV3Test, ADamagedOrForgedLayoutRecordIsFound) {
  save(13);
  if (world.is_root()) {
    FileDescriptor fd(::open(file.c_str(), O_RDWR));
    auto header = verify_checkpoint_file(fd.get(), "t");
    auto forged = decode_layout_record(header.layout_record);
    forged.description.config_json = "{\"forged\": 1}";
    header.layout_record = layout_record_for(forged.description, forged.layout);
    ASSERT_FALSE(header.layout_record.empty());
    write_at(fd.get(), 0, encode_integrity_header(header), "t");
    EXPECT_THROW(read_checkpoint_layout_v3(fd.get(), verify_checkpoint_file(fd.get(), "t")),
                 CorruptCheckpoint);
    // One byte of the record itself, past its head: its checksum no longer matches.
    const auto at = encode_integrity_header(header).size() - 1;
    std::vector<std::byte> bytes = encode_integrity_header(header);
    std::size_t last = at;
    while (bytes[last] == std::byte{0}) {
      --last;
    }
    bytes[last] ^= std::byte{0x10};
    write_at(fd.get(), 0, bytes, "t");
  }
  world.barrier();
  Workspace loaded;
  EXPECT_THROW(load_checkpoint_v3(file, world, request(13, 3), loaded, kTimeout),
               CorruptCheckpoint);
  EXPECT_TRUE(loaded.names().empty());
}

}  // namespace
}  // namespace epochrun::testing
