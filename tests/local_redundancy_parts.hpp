// A rank's node-local part for the redundancy tests: a copy file (local_copy.hpp) of two blobs
// whose values follow from a seed and the rank, of a size that differs from rank to rank (so
// that XOR parity pads), written and checked the way a save and a resume do.
#pragma once

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "local_copy.hpp"
#include "regular_file.hpp"

namespace epochrun::testing {

inline std::vector<double> part_values(std::uint64_t seed, int rank, std::size_t kib) {
  std::mt19937_64 random(seed * 1000003 + static_cast<std::uint64_t>(rank));
  std::vector<double> values(kib * 1024 / sizeof(double) + 37 * static_cast<std::size_t>(rank));
  for (auto& value : values) {
    value = static_cast<double>(random() % 1000000) / 7.0;
  }
  return values;
}

// Writes `rank`'s copy of `epoch` into `dir`.
inline void write_part(const std::filesystem::path& dir, std::int64_t epoch, int rank, int ranks,
                       std::uint64_t seed, std::size_t kib) {
  const auto values = part_values(seed, rank, kib);
  const std::int64_t step = epoch * 100 + rank;
  std::vector<SavedBlob> blobs(2);
  blobs[0].view.name = "state";
  blobs[0].view.dtype = DType::kF64;
  blobs[0].view.shape = {values.size()};
  blobs[0].view.bytes = std::as_bytes(std::span(values));
  blobs[1].view.name = "step";
  blobs[1].view.dtype = DType::kI64;
  blobs[1].view.shape = {1};
  blobs[1].view.bytes = std::as_bytes(std::span(&step, 1));
  write_local_copy(dir, "redundancy_test", epoch, rank, ranks, blobs);
}

// Empty when `rank`'s copy of `epoch` in `dir` holds exactly what write_part wrote, else why not.
inline std::string part_problem(const std::filesystem::path& dir, std::int64_t epoch, int rank,
                                std::uint64_t seed, std::size_t kib) {
  try {
    const auto file = local_copy_file(dir, epoch, rank);
    const auto fd = open_regular_file_for_reading(file);
    const auto record = read_local_copy_record(fd.get(), file.string());
    const auto values = part_values(seed, rank, kib);
    if (record.blobs.size() != 2 || record.blobs[0].bytes != values.size() * sizeof(double)) {
      return "another layout";
    }
    std::vector<double> read(values.size());
    read_at(fd.get(), record.blobs[0].offset, std::as_writable_bytes(std::span(read)),
            file.string());
    std::int64_t step = 0;
    read_at(fd.get(), record.blobs[1].offset, std::as_writable_bytes(std::span(&step, 1)),
            file.string());
    if (std::memcmp(read.data(), values.data(), values.size() * sizeof(double)) != 0 ||
        step != epoch * 100 + rank) {
      return "other values";
    }
    return "";
  } catch (const std::exception& error) {
    return error.what();
  }
}

}  // namespace epochrun::testing
