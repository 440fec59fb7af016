// Global arrays moved with collective parallel I/O, on real ranks and a real file: every rank
// writes its block of one dataset with one collective call -- through MPI-IO over a subarray
// view at the dataset's offset, and through parallel HDF5 with a hyperslab and a collective
// transfer, which HDF5 must report as really collective -- and the whole array reads back as
// one dataset with serial HDF5, and block by block at another rank count.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <vector>

#include "epochrun/errors.hpp"
#include "epochrun/global_array.hpp"
#include "global_array_io.hpp"
#include "h5_collective.hpp"
#include "h5_handle.hpp"
#include "h5_objects.hpp"
#include "mpi_io_file.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

const Shape kShape{30, 20};
const std::string kDataset = "/arrays/field";

// The value of cell (row, column): distinct everywhere, so a misplaced block shows.
double cell_value(std::uint64_t row, std::uint64_t column) {
  return static_cast<double>(row) * 1000.0 + static_cast<double>(column);
}

// The block's elements, row-major, as a rank would hold them.
std::vector<double> block_values(const Block& block) {
  std::vector<double> values;
  for (std::uint64_t i = 0; i < block.count[0]; ++i) {
    for (std::uint64_t j = 0; j < block.count[1]; ++j) {
      values.push_back(cell_value(block.start[0] + i, block.start[1] + j));
    }
  }
  return values;
}

// Rank 0 creates the file with a contiguous, allocated dataset of the global shape and a user
// block (as a checkpoint has), and every rank gets the dataset's offset.
std::uint64_t lay_out(const Communicator& comm, const std::filesystem::path& file) {
  std::int64_t offset = 0;
  if (comm.rank() == 0) {
    h5::Handle fcpl(H5Pcreate(H5P_FILE_CREATE), "fcpl");
    h5::check(H5Pset_userblock(fcpl.get(), 4096), "user block");
    h5::Handle h5file(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), "create");
    h5::Handle group(H5Gcreate2(h5file.get(), "arrays", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     "group");
    const std::vector<hsize_t> dims(kShape.begin(), kShape.end());
    h5::Handle space(H5Screate_simple(2, dims.data(), nullptr), "space");
    h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), "dcpl");
    h5::check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "contiguous");
    h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "allocate now");
    h5::Handle dataset(H5Dcreate2(h5file.get(), kDataset.c_str(), H5T_IEEE_F64LE, space.get(),
                                  H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                       "dataset");
    offset = static_cast<std::int64_t>(h5::offset_of(dataset.get(), kDataset));
  }
  comm.broadcast(offset);
  return static_cast<std::uint64_t>(offset);
}

// The whole array, read by this process alone with serial HDF5.
std::vector<double> read_whole(const std::filesystem::path& file) {
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "fapl");
  h5::Handle h5file(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), "open");
  h5::Handle dataset(H5Dopen2(h5file.get(), kDataset.c_str(), H5P_DEFAULT), "open dataset");
  std::vector<double> values(element_count(kShape));
  h5::check(H5Dread(dataset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
            "read");
  return values;
}

std::vector<double> expected_whole() {
  return block_values(Block{{0, 0}, kShape});
}

// Every byte of `file` outside [offset, offset + length): what a collective data write must
// leave alone (the metadata a checkpoint's integrity header hashes).
std::string bytes_outside(const std::filesystem::path& file, std::uint64_t offset,
                          std::uint64_t length) {
  std::string bytes = read_file(file);
  bytes.erase(offset, length);
  return bytes;
}

class CollectiveIo : public ::testing::Test {
 protected:
  const Communicator world = Communicator::world();
  ScratchDir directory{world};
  const std::filesystem::path file = directory / "field.h5";
  const Block block = balanced_block(kShape, world.size(), world.rank());
  const std::vector<double> values = block_values(block);
};

TEST_F(CollectiveIo, MpiIoWritesEveryRanksBlockIntoOneDatasetInOneCollectiveCall) {
  const StoredArray array{lay_out(world, file), kShape, sizeof(double)};
  const std::uint64_t length = element_count(kShape) * sizeof(double);
  const std::string before = world.rank() == 0 ? bytes_outside(file, array.offset, length) : "";
  MpiIoFile out(world, file, MpiIoFile::Access::kWrite, {{"romio_cb_write", "enable"}});
  EXPECT_EQ(out.hints_in_use().at("romio_cb_write"), "enable");
  out.write_block_all(array, block, std::as_bytes(std::span(values)));
  out.sync_and_close();
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_EQ(read_whole(file), expected_whole());
    EXPECT_EQ(bytes_outside(file, array.offset, length), before);
  }
}

TEST_F(CollectiveIo, ParallelHdf5WritesAndReadsWithATransferItReportsCollective) {
  const std::uint64_t length = element_count(kShape) * sizeof(double);
  const auto offset = lay_out(world, file);
  const std::string before = world.rank() == 0 ? bytes_outside(file, offset, length) : "";
  const auto written = h5::write_block_collectively(world.raw(), file, kDataset, DType::kF64, block,
                                                    std::as_bytes(std::span(values)),
                                                    {{"romio_cb_write", "enable"}});
  EXPECT_TRUE(written.collective()) << written.io_mode << " cause " << written.global_cause;
  EXPECT_EQ(written.io_mode, "contiguous collective");
  EXPECT_EQ(written.local_cause, 0u);
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_EQ(read_whole(file), expected_whole());
    // Opening the file read-write with the MPI-IO driver rewrote none of its metadata.
    EXPECT_EQ(bytes_outside(file, offset, length), before);
  }
  std::vector<double> read(values.size());
  const auto transfer = h5::read_block_collectively(world.raw(), file, kDataset, DType::kF64, block,
                                                    std::as_writable_bytes(std::span(read)), {});
  EXPECT_TRUE(transfer.collective()) << transfer.io_mode;
  EXPECT_EQ(read, values);
}

// h5::create_array_file lays out what the collective writes need on one rank: the dataset's
// bytes at the offset it returns, after the user block, whole for a serial HDF5 reader.
TEST_F(CollectiveIo, AnArrayFileLaidOutOnOneRankTakesEveryRanksBlockAtItsOffset) {
  std::int64_t offset = 0;
  if (world.rank() == 0) {
    offset =
        static_cast<std::int64_t>(h5::create_array_file(file, kDataset, DType::kF64, kShape, 4096));
  }
  world.broadcast(offset);
  EXPECT_GE(offset, 4096);
  const StoredArray array{static_cast<std::uint64_t>(offset), kShape, sizeof(double)};
  MpiIoFile out(world, file, MpiIoFile::Access::kWrite, {});
  out.write_block_all(array, block, std::as_bytes(std::span(values)));
  out.sync_and_close();
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_EQ(read_whole(file), expected_whole());
  }
}

// Written at 3 ranks, read back at 2 (ranks 0 and 1 of a split communicator) in their own
// blocks, and at 1 as one block.
TEST_F(CollectiveIo, ABlockOfAnotherDecompositionReadsBackAtAnotherRankCount) {
  const StoredArray array{lay_out(world, file), kShape, sizeof(double)};
  {
    MpiIoFile out(world, file, MpiIoFile::Access::kWrite, {});
    out.write_block_all(array, block, std::as_bytes(std::span(values)));
    out.sync_and_close();
  }
  for (const int ranks : {2, 1}) {
    MPI_Comm part = MPI_COMM_NULL;
    MPI_Comm_split(world.raw(), world.rank() < ranks ? 0 : MPI_UNDEFINED, world.rank(), &part);
    if (part != MPI_COMM_NULL) {
      const Communicator fewer(part);
      const Block mine = balanced_block(kShape, ranks, fewer.rank());
      std::vector<double> read(mine.element_count());
      MpiIoFile in(fewer, file, MpiIoFile::Access::kRead, {});
      in.read_block_all(array, mine, std::as_writable_bytes(std::span(read)));
      in.close();
      EXPECT_EQ(read, block_values(mine)) << ranks << " ranks, block " << block_to_string(mine);
      MPI_Comm_free(&part);
    }
  }
}

// More ranks than rows: a rank with an empty block still takes part in the collective call.
TEST_F(CollectiveIo, ARankWithAnEmptyBlockTakesPartAndWritesNothing) {
  const StoredArray array{lay_out(world, file), kShape, sizeof(double)};
  const Block rows = world.rank() == 0 ? Block{{0, 0}, kShape} : Block{{0, 0}, {0, 0}};
  const auto mine = block_values(rows);
  MpiIoFile out(world, file, MpiIoFile::Access::kWrite, {});
  out.write_block_all(array, rows, std::as_bytes(std::span(mine)));
  out.sync_and_close();
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_EQ(read_whole(file), expected_whole());
  }
}

// A communicator of the first `ranks` ranks of `world` (null on the others), freed with it.
struct FirstRanks {
  FirstRanks(const Communicator& world, int ranks) {
    MPI_Comm_split(world.raw(), world.rank() < ranks ? 0 : MPI_UNDEFINED, world.rank(), &comm);
  }
  ~FirstRanks() {
    if (comm != MPI_COMM_NULL) {
      MPI_Comm_free(&comm);
    }
  }
  FirstRanks(const FirstRanks&) = delete;
  FirstRanks& operator=(const FirstRanks&) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

constexpr std::chrono::seconds kTimeout{60};

// Writes the field at `writers` ranks (the first of `world`) with write_global_array and returns
// what a checkpoint records of it, on every rank of `world`.
StoredGlobalArray write_field(const Communicator& world, const std::filesystem::path& file,
                              int writers) {
  StoredGlobalArray stored{"field", {lay_out(world, file), kShape, sizeof(double)}, {}, {}};
  for (int writer = 0; writer < writers; ++writer) {
    stored.writer_blocks.push_back(balanced_block(kShape, writers, writer));
  }
  std::vector<std::int64_t> hashes(static_cast<std::size_t>(writers));
  const FirstRanks part(world, writers);
  if (part.comm != MPI_COMM_NULL) {
    const Communicator comm(part.comm);
    const Block& block = stored.writer_blocks[static_cast<std::size_t>(comm.rank())];
    const auto values = block_values(block);
    MpiIoFile out(comm, file, MpiIoFile::Access::kWrite, {});
    const auto hash = static_cast<std::int64_t>(write_global_array(
        comm, out, stored.where, block, std::as_bytes(std::span(values)), "save", kTimeout));
    out.sync_and_close();
    const auto all = comm.gather(std::span<const std::int64_t>(&hash, 1));
    for (std::size_t writer = 0; writer < all.size(); ++writer) {
      hashes[writer] = all[writer][0];
    }
  }
  world.broadcast(std::span(hashes));
  for (const auto hash : hashes) {
    stored.writer_xxh64.push_back(static_cast<std::uint64_t>(hash));
  }
  return stored;
}

// Reads `stored` at `ranks` ranks (the first of `world`) in their balanced blocks; each reading
// rank's block, or nullopt on the others. Throws what read_global_array throws.
std::optional<std::vector<double>> read_field(const Communicator& world,
                                              const std::filesystem::path& file,
                                              const StoredGlobalArray& stored, int ranks) {
  const FirstRanks part(world, ranks);
  if (part.comm == MPI_COMM_NULL) {
    return std::nullopt;
  }
  const Communicator comm(part.comm);
  std::vector<Block> wanted_by;
  for (int rank = 0; rank < ranks; ++rank) {
    wanted_by.push_back(balanced_block(kShape, ranks, rank));
  }
  std::vector<double> values(wanted_by[static_cast<std::size_t>(comm.rank())].element_count());
  MpiIoFile in(comm, file, MpiIoFile::Access::kRead, {});
  read_global_array(comm, in, stored, wanted_by, std::as_writable_bytes(std::span(values)), "load",
                    kTimeout);
  in.close();
  return values;
}

TEST_F(CollectiveIo, AGlobalArrayWrittenAtOneRankCountLoadsVerifiedAtAnyOther) {
  for (const int writers : {3, 2, 1}) {
    const auto stored = write_field(world, file, writers);
    for (const int readers : {3, 2, 1}) {
      const auto read = read_field(world, file, stored, readers);
      if (read) {
        EXPECT_EQ(*read, block_values(balanced_block(kShape, readers, world.rank())))
            << "written at " << writers << ", read at " << readers;
      }
    }
  }
}

TEST_F(CollectiveIo, ADamagedByteOfAGlobalArrayFailsTheLoadOnEveryRankAtAnyRankCount) {
  const auto stored = write_field(world, file, 3);
  if (world.rank() == 0) {
    // One byte of rank 1's block (rows 10 to 19): its first element's lowest byte.
    const auto offset = stored.where.offset + 10 * kShape[1] * sizeof(double);
    std::string bytes = read_file(file);
    bytes[offset] = static_cast<char>(bytes[offset] ^ 1);
    write_file(file, bytes);
  }
  world.barrier();
  for (const int readers : {3, 2}) {
    try {
      read_field(world, file, stored, readers);
      EXPECT_GE(world.rank(), readers) << "the damaged load succeeded at " << readers;
    } catch (const CorruptCheckpoint& error) {
      EXPECT_NE(std::string(error.what())
                    .find("global array 'field': the block [10:20, 0:20] written by rank 1 does "
                          "not match its checksum"),
                std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace epochrun::testing
