#include "bench/global_array_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "collective_errors.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/global_array.hpp"
#include "file_descriptor.hpp"
#include "global_array_io.hpp"
#include "h5_collective.hpp"
#include "mpi_io_file.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kArrayName[] = "field";
constexpr char kDataset[] = "/arrays/field";  // where format version 3 puts a global array
// A checkpoint keeps its integrity header in the HDF5 user block: the data starts after it.
constexpr std::uint64_t kUserBlockBytes = 4096;
// A block's rows are at most 32 KiB (4096 float64): 256 MiB per rank is 8192 of them.
constexpr std::uint64_t kBlockColumns = 4096;
// MPI-IO and HDF5's MPI-IO driver get the same hints, none: the implementation's defaults, so
// that neither side is tuned and the other not.
const MpiIoHints kHints{};

using Buffer = std::unique_ptr<std::byte[]>;

// The global array and its two decompositions, with where each block's bytes go in the plain
// file of the limits (the blocks one after another in rank order).
struct ArrayPlan {
  Shape shape;
  std::vector<int> grid;
  std::vector<Block> blocks;  // at every rank, index = rank
  std::vector<std::uint64_t> plain_offsets;
  std::vector<Block> fewer_blocks;  // at one rank fewer (empty on one rank)
  std::vector<std::uint64_t> fewer_plain_offsets;
  std::uint64_t total_bytes = 0;
};

std::uint64_t byte_size(const Block& block) {
  return block.element_count() * sizeof(double);
}

// Blocks of `bytes_per_rank` rounded down to whole rows (one element at least), each rank's
// the same size: balanced_block over process_grid(ranks, 2) of a shape the grid divides.
ArrayPlan plan_array(int ranks, std::uint64_t bytes_per_rank) {
  const std::uint64_t elements = std::max<std::uint64_t>(1, bytes_per_rank / sizeof(double));
  const std::uint64_t columns = std::min(kBlockColumns, elements);
  const std::uint64_t rows = elements / columns;
  ArrayPlan plan;
  plan.grid = process_grid(ranks, 2);
  plan.shape = {rows * std::uint64_t(plan.grid[0]), columns * std::uint64_t(plan.grid[1])};
  for (int rank = 0; rank < ranks; ++rank) {
    plan.blocks.push_back(balanced_block(plan.shape, ranks, rank));
    plan.plain_offsets.push_back(plan.total_bytes);
    plan.total_bytes += byte_size(plan.blocks.back());
  }
  std::uint64_t offset = 0;
  for (int rank = 0; rank + 1 < ranks; ++rank) {
    plan.fewer_blocks.push_back(balanced_block(plan.shape, ranks - 1, rank));
    plan.fewer_plain_offsets.push_back(offset);
    offset += byte_size(plan.fewer_blocks.back());
  }
  return plan;
}

// The bits of the cell at row-major `index` of the whole array (SplitMix64): incompressible,
// as trained weights are, and known to every rank for any block, so that a load at another
// decomposition can be checked cell by cell.
std::uint64_t cell_bits(std::uint64_t index) {
  std::uint64_t z = (index + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `block`'s cells, row-major, as the rank holding it keeps them (float64 bit patterns).
std::vector<std::uint64_t> block_cells(const Shape& shape, const Block& block) {
  std::vector<std::uint64_t> cells(block.element_count());
  for (std::uint64_t i = 0; i < block.count[0]; ++i) {
    const auto first = (block.start[0] + i) * shape[1] + block.start[1];
    for (std::uint64_t j = 0; j < block.count[1]; ++j) {
      cells[i * block.count[1] + j] = cell_bits(first + j);
    }
  }
  return cells;
}

// Whether `data` holds exactly `block`'s cells (computed row by row: no second copy).
bool holds_cells(const Shape& shape, const Block& block, const std::byte* data) {
  std::vector<std::uint64_t> row(block.count[1]);
  for (std::uint64_t i = 0; i < block.count[0]; ++i) {
    const auto first = (block.start[0] + i) * shape[1] + block.start[1];
    for (std::uint64_t j = 0; j < block.count[1]; ++j) {
      row[j] = cell_bits(first + j);
    }
    const auto row_bytes = row.size() * sizeof(double);
    if (std::memcmp(data + i * row_bytes, row.data(), row_bytes) != 0) {
      return false;
    }
  }
  return true;
}

void check_errno(bool ok, const std::string& what) {
  if (!ok) {
    throw Error(what + ": " + std::strerror(errno));
  }
}

// The write limit: rank 0 creates (truncates) one plain file, then every rank writes its
// block's bytes as one piece at its offset and fsyncs: the same bytes on the same ranks, the
// best the disk allows (no view, no exchange between ranks, no HDF5).
void plain_write(const Communicator& comm, const fs::path& file, std::uint64_t offset,
                 std::span<const std::byte> data) {
  run_on_root_then_agree(comm, "create " + file.string(), [&] {
    FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    check_errno(fd.valid(), "create " + file.string());
    fd.close(file.string());
  });
  FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
  check_errno(fd.valid(), "open " + file.string());
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t written = ::pwrite(fd.get(), data.data() + done, data.size() - done,
                                     static_cast<off_t>(offset + done));
    check_errno(written > 0, "write " + file.string());
    done += static_cast<std::size_t>(written);
  }
  check_errno(::fsync(fd.get()) == 0, "fsync " + file.string());
  fd.close(file.string());
}

// The read limit: `bytes` at `offset` into a freshly allocated buffer (its page faults are part
// of what any load pays), returned so that freeing it is not timed.
Buffer plain_read(const fs::path& file, std::uint64_t offset, std::uint64_t bytes) {
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(bytes);
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  check_errno(fd.valid(), "open " + file.string());
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t got =
        ::pread(fd.get(), buffer.get() + done, bytes - done, static_cast<off_t>(offset + done));
    check_errno(got > 0, "read " + file.string());
    done += static_cast<std::size_t>(got);
  }
  return buffer;
}

// Rank 0 lays the file out with serial HDF5, as a checkpoint's save does before any rank
// writes; every rank gets the dataset's offset.
std::uint64_t lay_out(const Communicator& comm, const fs::path& file, const ArrayPlan& plan) {
  std::int64_t offset = 0;
  run_on_root_then_agree(comm, "lay out " + file.string(), [&] {
    offset = static_cast<std::int64_t>(
        h5::create_array_file(file, kDataset, DType::kF64, plan.shape, kUserBlockBytes));
  });
  comm.broadcast(offset);
  return static_cast<std::uint64_t>(offset);
}

// The save as a checkpoint of format version 3 makes it: the layout, one collective MPI-IO
// write of every rank's block (hashed as it goes), MPI_File_sync. Returns what the checkpoint
// records of the array but the other ranks' checksums (gathered after, untimed).
StoredGlobalArray array_save(const Communicator& comm, const fs::path& file, const ArrayPlan& plan,
                             std::span<const std::byte> data, std::uint64_t& hash) {
  StoredGlobalArray stored{
      kArrayName, {lay_out(comm, file, plan), plan.shape, sizeof(double)}, plan.blocks, {}};
  std::optional<MpiIoFile> out;
  run_then_agree(comm, "open " + file.string(),
                 [&] { out.emplace(comm, file, MpiIoFile::Access::kWrite, kHints); });
  hash = write_global_array(comm, *out, stored.where, plan.blocks[std::size_t(comm.rank())], data,
                            "save " + file.string(), kDefaultSaveTimeout);
  run_then_agree(comm, "sync " + file.string(), [&] { out->sync_and_close(); });
  return stored;
}

// The same file written by parallel HDF5 instead: the layout, one collective H5Dwrite of the
// same hyperslabs, and MPI_File_sync, since HDF5's MPI-IO driver closes a file without one and
// a save must reach the disk as the limit's bytes do.
h5::CollectiveTransfer h5dwrite_save(const Communicator& comm, const fs::path& file,
                                     const ArrayPlan& plan, std::span<const std::byte> data) {
  lay_out(comm, file, plan);
  h5::CollectiveTransfer transfer;
  run_then_agree(comm, "H5Dwrite " + file.string(), [&] {
    transfer = h5::write_block_collectively(comm.raw(), file, kDataset, DType::kF64,
                                            plan.blocks[std::size_t(comm.rank())], data, kHints);
  });
  run_then_agree(comm, "sync " + file.string(), [&] {
    MpiIoFile(comm, file, MpiIoFile::Access::kWrite, kHints).sync_and_close();
  });
  return transfer;
}

// read_global_array of `stored` into a fresh buffer holding this rank's block of `wanted`.
Buffer array_load(const Communicator& comm, const fs::path& file, const StoredGlobalArray& stored,
                  const std::vector<Block>& wanted) {
  const auto bytes = byte_size(wanted[std::size_t(comm.rank())]);
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(bytes);
  std::optional<MpiIoFile> in;
  run_then_agree(comm, "open " + file.string(),
                 [&] { in.emplace(comm, file, MpiIoFile::Access::kRead, kHints); });
  read_global_array(comm, *in, stored, wanted, std::span(buffer.get(), bytes),
                    "load " + file.string(), kDefaultSaveTimeout);
  run_then_agree(comm, "close " + file.string(), [&] { in->close(); });
  return buffer;
}

// What the rounds time, each against its limit.
struct ArraySeries {
  Series save{"array_save",
              "write_global_array: rank 0 lays out the HDF5 file, one collective MPI-IO write "
              "over a subarray view (each block hashed), MPI_File_sync",
              {}};
  Series save_h5{"array_save_h5dwrite",
                 "the same file by parallel HDF5: rank 0 lays it out, one collective H5Dwrite of "
                 "the same hyperslabs, MPI_File_sync",
                 {}};
  Series write{"array_write_limit",
               "pwrite of each rank's block as one piece at its offset in one plain file (rank 0 "
               "creates it), fsync",
               {}};
  Series load{"array_load",
              "read_global_array at the same decomposition: one collective MPI-IO read into "
              "fresh buffers, every writer block's xxh64 verified",
              {}};
  Series load_h5{"array_load_h5dread",
                 "parallel HDF5's collective H5Dread of the same hyperslabs into fresh buffers "
                 "(no checksum)",
                 {}};
  Series read{"array_read_limit", "pread of each rank's block bytes into a fresh buffer", {}};
  Series load_fewer{"array_load_fewer_ranks",
                    "read_global_array on one rank fewer, the first ranks in their own balanced "
                    "blocks: each writer block read and verified by one of them, then "
                    "redistributed",
                    {}};
  Series read_fewer{"array_read_limit_fewer_ranks",
                    "pread of the same total bytes on those ranks, one piece each, into fresh "
                    "buffers",
                    {}};
  std::string save_io_mode;  // how HDF5 carried the last round's H5Dwrite and H5Dread
  std::string load_io_mode;
};

// The files of one round: the array written by MPI-IO, by H5Dwrite, and the plain file.
struct RoundFiles {
  fs::path mpiio;
  fs::path h5dwrite;
  fs::path plain;
};

RoundFiles round_files(const fs::path& directory, std::int64_t round) {
  const auto stem = (directory / ("array-round-" + std::to_string(round))).string();
  return {stem + "-mpiio.h5", stem + "-h5dwrite.h5", stem + "-plain.bin"};
}

// Everything one round measures needs.
struct ArrayRound {
  const Communicator& comm;
  const std::optional<Communicator>& fewer;  // the first ranks but one; nullopt on the others
  const ArrayPlan& plan;
  std::span<const std::byte> data;  // this rank's block
  RoundFiles files;
  std::int64_t round;
};

// The three saves of a round; returns what the MPI-IO save recorded, checksums gathered.
StoredGlobalArray save_round(const ArrayRound& r, ArraySeries& series) {
  const auto rank = std::size_t(r.comm.rank());
  StoredGlobalArray stored;
  std::uint64_t hash = 0;
  in_turn(r.round, {[&] {
                      series.save.seconds.push_back(timed(r.comm, series.save.name, [&] {
                        stored = array_save(r.comm, r.files.mpiio, r.plan, r.data, hash);
                      }));
                    },
                    [&] {
                      series.save_h5.seconds.push_back(timed(r.comm, series.save_h5.name, [&] {
                        series.save_io_mode =
                            h5dwrite_save(r.comm, r.files.h5dwrite, r.plan, r.data).io_mode;
                      }));
                    },
                    [&] {
                      series.write.seconds.push_back(timed(r.comm, series.write.name, [&] {
                        plain_write(r.comm, r.files.plain, r.plan.plain_offsets[rank], r.data);
                      }));
                    }});
  const auto mine = static_cast<std::int64_t>(hash);  // the typed collectives have no uint64
  for (const auto& each : r.comm.allgather(std::span(&mine, 1))) {
    stored.writer_xxh64.push_back(static_cast<std::uint64_t>(each.at(0)));
  }
  return stored;
}

// Untimed, before every read of a round: no file of the round in the page cache, so that every
// load and every limit reads the disk (a load at fewer ranks came out at 0.29 to 0.63 times its
// limit when the files the round's first reads had cached stayed there for the later ones).
void drop_round_files(const ArrayRound& r) {
  drop_files_from_cache(r.comm, {r.files.mpiio, r.files.h5dwrite, r.files.plain});
}

// Fails the round on every rank when a load did not bring back what was saved.
void check_loaded(const Communicator& comm, const std::string& what, bool same) {
  run_then_agree(comm, what, [&] {
    if (!same) {
      throw Error(what + ": the loaded array differs from what was saved");
    }
  });
}

// The loads of a round at the decomposition the array was written in, and the plain read.
void load_round(const ArrayRound& r, const StoredGlobalArray& stored, MeasureSettings& settings,
                ArraySeries& series) {
  const auto rank = std::size_t(r.comm.rank());
  const auto bytes = r.data.size();
  // Each load is checked and its buffer freed before the next measure: a measure that runs
  // while another's buffers are still held faults its fresh pages in a fuller memory (the plain
  // read was 4 times slower after the two loads than before them).
  in_turn(r.round, {[&] {
                      before_read(r.comm, settings);
                      drop_round_files(r);
                      Buffer loaded;
                      series.load.seconds.push_back(timed(r.comm, series.load.name, [&] {
                        loaded = array_load(r.comm, r.files.mpiio, stored, r.plan.blocks);
                      }));
                      check_loaded(r.comm, series.load.name,
                                   std::memcmp(loaded.get(), r.data.data(), bytes) == 0);
                    },
                    [&] {
                      before_read(r.comm, settings);
                      drop_round_files(r);
                      Buffer loaded;
                      series.load_h5.seconds.push_back(timed(r.comm, series.load_h5.name, [&] {
                        loaded = std::make_unique_for_overwrite<std::byte[]>(bytes);
                        series.load_io_mode =
                            h5::read_block_collectively(r.comm.raw(), r.files.h5dwrite, kDataset,
                                                        DType::kF64, r.plan.blocks[rank],
                                                        std::span(loaded.get(), bytes), kHints)
                                .io_mode;
                      }));
                      check_loaded(r.comm, series.load_h5.name,
                                   std::memcmp(loaded.get(), r.data.data(), bytes) == 0);
                    },
                    [&] {
                      before_read(r.comm, settings);
                      drop_round_files(r);
                      Buffer plain;
                      series.read.seconds.push_back(timed(r.comm, series.read.name, [&] {
                        plain = plain_read(r.files.plain, r.plan.plain_offsets[rank], bytes);
                      }));
                    }});
}

// The load at one rank fewer and its plain read of the same total bytes on the same ranks; the
// rank left out only waits.
void fewer_round(const ArrayRound& r, const StoredGlobalArray& stored, MeasureSettings& settings,
                 ArraySeries& series) {
  const auto rank = std::size_t(r.comm.rank());
  Buffer loaded;
  alternate(
      r.round,
      [&] {
        before_read(r.comm, settings);
        drop_round_files(r);
        series.load_fewer.seconds.push_back(timed(r.comm, series.load_fewer.name, [&] {
          if (r.fewer) {
            loaded = array_load(*r.fewer, r.files.mpiio, stored, r.plan.fewer_blocks);
          }
        }));
      },
      [&] {
        before_read(r.comm, settings);
        drop_round_files(r);
        Buffer plain;
        series.read_fewer.seconds.push_back(timed(r.comm, series.read_fewer.name, [&] {
          if (r.fewer) {
            plain = plain_read(r.files.plain, r.plan.fewer_plain_offsets[rank],
                               byte_size(r.plan.fewer_blocks[rank]));
          }
        }));
      });
  check_loaded(r.comm, series.load_fewer.name,
               !r.fewer || holds_cells(r.plan.shape, r.plan.fewer_blocks[rank], loaded.get()));
}

// The rows of measure_global_arrays, from the rounds' series.
nlohmann::json array_rows(const Communicator& comm, const ArrayPlan& plan,
                          const ArraySeries& series) {
  const double bytes = double(plan.total_bytes);
  const int fewer = comm.size() - 1;
  auto with = [](nlohmann::json row, const char* key, const nlohmann::json& value) {
    row[key] = value;
    return row;
  };
  auto rows = nlohmann::json::array();
  rows.push_back(with_target(compare(series.save, series.write, bytes), kArraySaveTarget));
  rows.push_back(
      with(compare(series.save_h5, series.write, bytes), "io_mode", series.save_io_mode));
  rows.push_back(with_target(compare(series.load, series.read, bytes), kArrayLoadTarget));
  rows.push_back(with(compare(series.load_h5, series.read, bytes), "io_mode", series.load_io_mode));
  if (fewer > 0) {
    rows.push_back(
        with(with_target(compare(series.load_fewer, series.read_fewer, bytes), kArrayLoadTarget),
             "read_ranks", fewer));
  }
  rows.push_back(compare(series.write, series.write, bytes));
  rows.push_back(compare(series.read, series.read, bytes));
  if (fewer > 0) {
    rows.push_back(with(compare(series.read_fewer, series.read_fewer, bytes), "read_ranks", fewer));
  }
  for (auto& row : rows) {
    row["array_shape"] = plan.shape;
    row["process_grid"] = plan.grid;
    row["bytes_per_rank"] = byte_size(plan.blocks[0]);
  }
  return rows;
}

}  // namespace

nlohmann::json measure_global_arrays(const Communicator& comm, const fs::path& directory,
                                     std::uint64_t bytes_per_rank, MeasureSettings& settings) {
  const auto plan = plan_array(comm.size(), bytes_per_rank);
  const auto cells = block_cells(plan.shape, plan.blocks[std::size_t(comm.rank())]);
  // The first ranks but one, as a job resumed on fewer ranks would run.
  const bool reads_fewer = comm.rank() + 1 < comm.size();
  const auto fewer = comm.split(reads_fewer ? 0 : Communicator::kNoColor, comm.rank());
  ArraySeries series;
  for (std::int64_t round = 0; round < settings.rounds; ++round) {
    const ArrayRound r{
        comm, fewer, plan, std::as_bytes(std::span(cells)), round_files(directory, round), round};
    const auto stored = save_round(r, series);
    load_round(r, stored, settings, series);
    if (comm.size() > 1) {
      fewer_round(r, stored, settings, series);
    }
    // Each round's files go before the next, so that no round measures a fuller disk.
    run_on_root_then_agree(comm, "round " + std::to_string(round), [&] {
      for (const auto& file : {r.files.mpiio, r.files.h5dwrite, r.files.plain}) {
        fs::remove(file);
      }
    });
  }
  return array_rows(comm, plan, series);
}

}  // namespace epochrun::cli
