#include "integrity_header.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

constexpr char kMagic[] = "EPOCHRUN-CKPT-INTEGRITY\n";  // 24 bytes, no terminator stored
constexpr std::size_t kMagicSize = sizeof(kMagic) - 1;
constexpr std::size_t kFixedSize = kMagicSize + 5 * 8;  // magic + 5 u64 fields
// The layout record's head, right after the header's checksum: its magic, version, length, the
// xxh64 of the record and the xxh64 of the head before it; the record follows.
constexpr char kRecordMagic[] = "EPOCHRUN-LAYOUT\n";  // 16 bytes, no terminator stored
constexpr std::size_t kRecordMagicSize = sizeof(kRecordMagic) - 1;
constexpr std::size_t kRecordHeadSize = kRecordMagicSize + 4 * 8;
// Version 2 records begin with the metadata hash of the file they were written into, under the
// record's own checksum: a record that says which metadata it describes. Version 1 (written from
// 26 to 28 November 2026) does not; its file is read with HDF5.
constexpr std::uint64_t kLayoutRecordVersion = 2;
constexpr std::uint64_t kUnboundLayoutRecordVersion = 1;
constexpr std::size_t kRecordBindingSize = 8;
// The smallest user block HDF5 allows, which files written before 23 November 2026 have.
constexpr std::uint64_t kMinUserBlockSize = 512;
// What saves now write at least: a whole page, so that the HDF5 part of the file starts
// page-aligned and so do the large datasets HDF5 aligns within it (direct I/O writes them).
constexpr std::uint64_t kMinWrittenUserBlockSize = 4096;

void put_u64(std::vector<std::byte>& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
  }
}

std::uint64_t get_u64(std::span<const std::byte> bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value |= static_cast<std::uint64_t>(bytes[at + static_cast<std::size_t>(i)]) << (8 * i);
  }
  return value;
}

// xxh64 over [user_block_size, file_size) minus the (sorted, disjoint) extents.
std::uint64_t hash_metadata(int fd, const IntegrityHeader& header, const std::string& what) {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  // As large as the largest run of metadata, at most 1 MiB, and not zeroed: the metadata of a
  // small checkpoint is a few KiB, and zeroing (and faulting in) a 1 MiB buffer cost each seal
  // and each verification 0.4 ms, more than the rest of either.
  std::uint64_t largest = 0;
  std::uint64_t at = header.user_block_size;
  for (const auto& extent : header.extents) {
    largest = std::max(largest, extent.offset > at ? extent.offset - at : 0);
    at = std::max(at, extent.offset + extent.length);
  }
  largest = std::max(largest, header.file_size > at ? header.file_size - at : 0);
  const auto capacity = static_cast<std::size_t>(std::min<std::uint64_t>(largest, 1 << 20));
  const std::unique_ptr<std::byte[]> buffer(new std::byte[std::max<std::size_t>(capacity, 1)]);
  auto hash_range = [&](std::uint64_t begin, std::uint64_t end) {
    while (begin < end) {
      const auto size = static_cast<std::size_t>(std::min<std::uint64_t>(end - begin, capacity));
      read_at(fd, begin, std::span(buffer.get(), size), what);
      XXH64_update(state.get(), buffer.get(), size);
      begin += size;
    }
  };
  std::uint64_t position = header.user_block_size;
  for (const auto& extent : header.extents) {
    hash_range(position, extent.offset);
    position = extent.offset + extent.length;
  }
  hash_range(position, header.file_size);
  return XXH64_digest(state.get());
}

// The bytes a header of `extent_count` extents and a layout record of `record_bytes` take.
std::uint64_t header_bytes(std::size_t extent_count, std::size_t record_bytes) {
  return kFixedSize + 16 * static_cast<std::uint64_t>(extent_count) + 8 +
         (record_bytes > 0 ? kRecordHeadSize + kRecordBindingSize + record_bytes : 0);
}

// The layout record at `at` in `bytes` (the header's end) into `header`: none when there is no
// magic (written before it) or the record is of a later version.
void read_layout_record(std::span<const std::byte> bytes, std::size_t at, IntegrityHeader& header) {
  if (bytes.size() < at + kRecordHeadSize ||
      std::memcmp(bytes.data() + at, kRecordMagic, kRecordMagicSize) != 0) {
    return;
  }
  const auto version = get_u64(bytes, at + kRecordMagicSize);
  const auto length = get_u64(bytes, at + kRecordMagicSize + 8);
  const auto record_xxh64 = get_u64(bytes, at + kRecordMagicSize + 16);
  if (get_u64(bytes, at + kRecordMagicSize + 24) !=
      XXH64(bytes.data() + at, kRecordMagicSize + 24, 0)) {
    throw CorruptCheckpoint("integrity header: the layout record's head is damaged");
  }
  if (version != kLayoutRecordVersion && version != kUnboundLayoutRecordVersion) {
    return;  // a later epochrun's: the reader reads the layout with HDF5
  }
  const auto begin = at + kRecordHeadSize;
  if (length > bytes.size() - begin) {
    throw CorruptCheckpoint("integrity header: the layout record does not fit its user block");
  }
  auto record = bytes.subspan(begin, static_cast<std::size_t>(length));
  if (XXH64(record.data(), record.size(), 0) != record_xxh64) {
    throw CorruptCheckpoint("integrity header: the layout record's checksum does not match");
  }
  if (version == kLayoutRecordVersion) {
    if (record.size() < kRecordBindingSize) {
      throw CorruptCheckpoint(
          "integrity header: the layout record is too short for the metadata hash it begins with");
    }
    header.record_metadata_xxh64 = get_u64(record, 0);
    record = record.subspan(kRecordBindingSize);
  }
  header.layout_record.assign(record.begin(), record.end());
}

}  // namespace

bool fits_user_block(std::size_t extent_count, std::size_t record_bytes,
                     std::uint64_t user_block_size) {
  return header_bytes(extent_count, record_bytes) <= user_block_size;
}

std::uint64_t user_block_size_for(std::size_t extent_count, std::size_t record_bytes) {
  const std::uint64_t needed = header_bytes(extent_count, record_bytes);
  std::uint64_t size = kMinWrittenUserBlockSize;
  while (size < needed) {
    size *= 2;
  }
  return size;
}

std::vector<std::byte> encode_integrity_header(const IntegrityHeader& header) {
  std::vector<std::byte> out;
  out.reserve(header.user_block_size);
  for (std::size_t i = 0; i < kMagicSize; ++i) {
    out.push_back(static_cast<std::byte>(kMagic[i]));
  }
  put_u64(out, kIntegrityHeaderVersion);
  put_u64(out, header.user_block_size);
  put_u64(out, header.file_size);
  put_u64(out, header.metadata_xxh64);
  put_u64(out, header.extents.size());
  for (const auto& extent : header.extents) {
    put_u64(out, extent.offset);
    put_u64(out, extent.length);
  }
  put_u64(out, XXH64(out.data(), out.size(), 0));
  if (!header.layout_record.empty()) {
    const auto head = out.size();
    for (std::size_t i = 0; i < kRecordMagicSize; ++i) {
      out.push_back(static_cast<std::byte>(kRecordMagic[i]));
    }
    // The record is bound to the metadata the header's hash covers: the hash goes first.
    std::vector<std::byte> record;
    record.reserve(kRecordBindingSize + header.layout_record.size());
    put_u64(record, header.metadata_xxh64);
    record.insert(record.end(), header.layout_record.begin(), header.layout_record.end());
    put_u64(out, kLayoutRecordVersion);
    put_u64(out, record.size());
    put_u64(out, XXH64(record.data(), record.size(), 0));
    put_u64(out, XXH64(out.data() + head, out.size() - head, 0));
    out.insert(out.end(), record.begin(), record.end());
  }
  if (out.size() > header.user_block_size) {
    throw Error("integrity header of " + std::to_string(out.size()) +
                " bytes does not fit a user block of " + std::to_string(header.user_block_size));
  }
  out.resize(header.user_block_size, std::byte{0});
  return out;
}

IntegrityHeader decode_integrity_header(std::span<const std::byte> bytes,
                                        std::uint64_t actual_file_size) {
  if (bytes.size() < kFixedSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    throw CorruptCheckpoint(
        "no epochrun integrity header (not an epochrun checkpoint, or its first bytes are "
        "damaged)");
  }
  std::size_t at = kMagicSize;
  const auto version = get_u64(bytes, at);
  IntegrityHeader header;
  header.user_block_size = get_u64(bytes, at += 8);
  header.file_size = get_u64(bytes, at += 8);
  header.metadata_xxh64 = get_u64(bytes, at += 8);
  const auto count = get_u64(bytes, at += 8);
  at += 8;
  // Only what locating the header's own checksum needs is checked before that checksum; every
  // other field, the version included, is believed only once the checksum matched, so that a
  // damaged header always reads as damage (never as, say, a newer version).
  const auto& size = header.user_block_size;
  if (size < kMinUserBlockSize || size > kMaxUserBlockSize || (size & (size - 1)) != 0) {
    throw CorruptCheckpoint("integrity header: invalid user block size " + std::to_string(size));
  }
  if (size > actual_file_size || size > bytes.size()) {
    throw CorruptCheckpoint("integrity header: user block larger than the file");
  }
  if (count > (size - kFixedSize - 8) / 16) {
    throw CorruptCheckpoint("integrity header: " + std::to_string(count) +
                            " extents cannot fit its user block");
  }
  const std::size_t hashed = kFixedSize + 16 * static_cast<std::size_t>(count);
  if (get_u64(bytes, hashed) != XXH64(bytes.data(), hashed, 0)) {
    throw CorruptCheckpoint("integrity header: its own checksum does not match (damaged header)");
  }
  if (version != kIntegrityHeaderVersion) {
    throw CheckpointMismatch("integrity header version " + std::to_string(version) +
                             " is not the version this epochrun reads (" +
                             std::to_string(kIntegrityHeaderVersion) + ")");
  }
  if (header.file_size != actual_file_size) {
    throw CorruptCheckpoint("the file has " + std::to_string(actual_file_size) + " bytes, " +
                            std::to_string(header.file_size) +
                            " were committed (truncated or extended)");
  }
  std::uint64_t previous_end = size;
  for (std::uint64_t i = 0; i < count; ++i) {
    DataExtent extent{get_u64(bytes, at), get_u64(bytes, at + 8)};
    at += 16;
    // Sorted, disjoint, inside the file after the user block: overflow-safe comparisons.
    if (extent.offset < previous_end || extent.length > actual_file_size ||
        extent.offset > actual_file_size - extent.length) {
      throw CorruptCheckpoint("integrity header: data extent " + std::to_string(i) +
                              " is out of order or outside the file");
    }
    previous_end = extent.offset + extent.length;
    header.extents.push_back(extent);
  }
  // The record, when there is one, follows the header's checksum.
  read_layout_record(bytes.first(static_cast<std::size_t>(size)), at + 8, header);
  return header;
}

void seal_checkpoint_file(int fd, const std::string& what, std::uint64_t user_block_size,
                          std::vector<DataExtent> extents,
                          std::span<const std::byte> layout_record) {
  std::sort(extents.begin(), extents.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
  IntegrityHeader header;
  header.user_block_size = user_block_size;
  header.file_size = file_size(fd);
  header.extents = std::move(extents);
  header.layout_record.assign(layout_record.begin(), layout_record.end());
  header.metadata_xxh64 = hash_metadata(fd, header, what);
  write_at(fd, 0, encode_integrity_header(header), "the integrity header of " + what);
}

IntegrityHeader read_integrity_header(int fd, const std::string& what) {
  // A short read or an I/O error: the file cannot be what was committed.
  return read_or_corrupt([&] {
    const auto size_of_file = file_size(fd);
    // The first page: the whole user block of most files, whose size it says.
    std::vector<std::byte> bytes(
        static_cast<std::size_t>(std::min<std::uint64_t>(kMinWrittenUserBlockSize, size_of_file)));
    read_at(fd, 0, bytes, what);
    if (bytes.size() >= kFixedSize && std::memcmp(bytes.data(), kMagic, kMagicSize) == 0) {
      const auto size = get_u64(bytes, kMagicSize + 8);
      if (size > bytes.size() && size <= std::min(kMaxUserBlockSize, size_of_file)) {
        const auto had = bytes.size();
        bytes.resize(static_cast<std::size_t>(size));
        read_at(fd, had, std::span(bytes).subspan(had), what);
      }
    }
    return decode_integrity_header(bytes, size_of_file);
  });
}

IntegrityHeader verify_checkpoint_file(int fd, const std::string& what) {
  auto header = read_integrity_header(fd, what);
  read_or_corrupt([&] {
    if (hash_metadata(fd, header, what) != header.metadata_xxh64) {
      throw CorruptCheckpoint("its HDF5 metadata does not match the checksum recorded at commit");
    }
  });
  return header;
}

}  // namespace epochrun
