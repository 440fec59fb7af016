// Parallel HDF5 proper: every rank opens one file with the MPI-IO file driver and moves its
// block of a global array dataset with a hyperslab selection and a collective transfer
// (H5FD_MPIO_COLLECTIVE), and HDF5 says how it really carried it. Internal to the library.
//
// The transfers are collective over `comm`: every rank makes each call, or the others wait.
// The file and the dataset must exist (laid out beforehand, e.g. by create_array_file on one
// rank); the transfers change no metadata of the file.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>

#include "epochrun/dtype.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun::h5 {

// How HDF5 carried a transfer (H5Pget_mpio_actual_io_mode, H5Pget_mpio_no_collective_cause).
struct CollectiveTransfer {
  // "contiguous collective", "chunk collective", "chunk mixed" or "no collective".
  std::string io_mode;
  // H5D_mpio_no_collective_cause_t bits: why this rank, and why any rank, fell back to
  // independent I/O (0: it did not).
  std::uint32_t local_cause = 0;
  std::uint32_t global_cause = 0;
  bool collective() const { return io_mode != "no collective" && global_cause == 0; }
};

// Serial HDF5, on one process (rank 0, before a collective write): creates or truncates `file`
// with a user block of `user_block_bytes` (a multiple of 512, or 0) and one dataset at
// `dataset` (its groups created) of `dtype` and `global_shape`, as a checkpoint lays a global
// array out (docs/FORMAT.md, format version 3): contiguous, allocated at creation and never filled
// (a fill would write every byte twice), starting on a page when it is 1 MiB or more. Returns the
// offset of the dataset's bytes, where MpiIoFile writes them.
std::uint64_t create_array_file(const std::filesystem::path& file, const std::string& dataset,
                                DType dtype, const Shape& global_shape,
                                std::uint64_t user_block_bytes);

// Each rank writes `data` (its block's elements, row-major, of `dtype`) into its block of the
// dataset `dataset` of `file`, opened read-write with the MPI-IO driver and `hints`.
CollectiveTransfer write_block_collectively(MPI_Comm comm, const std::filesystem::path& file,
                                            const std::string& dataset, DType dtype,
                                            const Block& block, std::span<const std::byte> data,
                                            const std::map<std::string, std::string>& hints);
// Each rank reads its block of the dataset into `data`.
CollectiveTransfer read_block_collectively(MPI_Comm comm, const std::filesystem::path& file,
                                           const std::string& dataset, DType dtype,
                                           const Block& block, std::span<std::byte> data,
                                           const std::map<std::string, std::string>& hints);

}  // namespace epochrun::h5
