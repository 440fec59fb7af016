#include <gtest/gtest.h>

#include <xxhash.h>

#include "epochrun/errors.hpp"
#include "integrity_header.hpp"

namespace epochrun {
namespace {

IntegrityHeader sample() {
  IntegrityHeader header;
  header.user_block_size = user_block_size_for(2);
  header.file_size = 10000;
  header.metadata_xxh64 = 0x0123456789abcdefULL;
  header.extents = {{4096, 80}, {8192, 8}};
  return header;
}

TEST(IntegrityHeader, RoundTrips) {
  const auto header = sample();
  const auto bytes = encode_integrity_header(header);
  EXPECT_EQ(bytes.size(), 4096u);
  const auto decoded = decode_integrity_header(bytes, 10000);
  EXPECT_EQ(decoded.user_block_size, header.user_block_size);
  EXPECT_EQ(decoded.metadata_xxh64, header.metadata_xxh64);
  ASSERT_EQ(decoded.extents.size(), 2u);
  EXPECT_EQ(decoded.extents[1].offset, 8192u);
}

TEST(IntegrityHeader, UserBlockGrowsInPowersOfTwo) {
  EXPECT_EQ(user_block_size_for(0), 4096u);
  EXPECT_EQ(user_block_size_for(251), 4096u);
  EXPECT_EQ(user_block_size_for(252), 8192u);
  EXPECT_EQ(user_block_size_for(10000), 262144u);
}

TEST(IntegrityHeader, EveryDamagedHeaderByteIsRejected) {
  const auto good = encode_integrity_header(sample());
  const std::size_t used = 24 + 5 * 8 + 2 * 16 + 8;
  for (std::size_t at = 0; at < used; ++at) {
    auto bytes = good;
    bytes[at] ^= std::byte{0x01};
    EXPECT_THROW(decode_integrity_header(bytes, 10000), CheckpointError) << "byte " << at;
  }
}

// A damaged version field is damage, not a newer version: the header's own checksum is checked
// first, so `latest` skips such a file instead of refusing the whole resume.
TEST(IntegrityHeader, ADamagedVersionFieldIsCorruptionNotAnotherVersion) {
  const auto good = encode_integrity_header(sample());
  for (std::size_t bit = 0; bit < 64; ++bit) {
    auto bytes = good;
    bytes[24 + bit / 8] ^= std::byte{static_cast<unsigned char>(1U << (bit % 8))};
    EXPECT_THROW(decode_integrity_header(bytes, 10000), CorruptCheckpoint) << "bit " << bit;
  }
}

TEST(IntegrityHeader, ATruncatedOrExtendedFileIsNamed) {
  const auto bytes = encode_integrity_header(sample());
  try {
    decode_integrity_header(bytes, 9999);
    FAIL();
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("9999 bytes, 10000 were committed"), std::string::npos)
        << error.what();
  }
}

TEST(IntegrityHeader, CraftedExtentsAndSizesAreRejectedWithoutAllocating) {
  auto crafted = [](auto change) {
    auto header = sample();
    change(header);
    return encode_integrity_header(header);
  };
  // Overlapping, out of order, inside the user block, past the end, overflowing.
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) {
                                         h.extents = {{1024, 80}, {1050, 8}};
                                       }),
                                       10000),
               CorruptCheckpoint);
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) {
                                         h.extents = {{4096, 8}, {1024, 8}};
                                       }),
                                       10000),
               CorruptCheckpoint);
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) {
                                         h.extents = {{100, 8}};
                                       }),
                                       10000),
               CorruptCheckpoint);
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) {
                                         h.extents = {{9990, 80}};
                                       }),
                                       10000),
               CorruptCheckpoint);
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) {
                                         h.extents = {{1024, ~0ULL}};
                                       }),
                                       10000),
               CorruptCheckpoint);
  // A header claiming more extents than its block holds is refused from the count alone.
  auto bytes = encode_integrity_header(sample());
  for (int i = 0; i < 8; ++i) {
    bytes[24 + 32 + static_cast<std::size_t>(i)] = std::byte{0xff};
  }
  EXPECT_THROW(decode_integrity_header(bytes, 10000), CorruptCheckpoint);
  // A user block larger than the file, or not a power of two.
  EXPECT_THROW(decode_integrity_header(crafted([](auto& h) { h.user_block_size = 768; }), 10000),
               std::exception);
  EXPECT_THROW(decode_integrity_header(std::vector<std::byte>(100), 10000), CorruptCheckpoint);
}

IntegrityHeader with_record() {
  auto header = sample();
  for (int i = 0; i < 300; ++i) {
    header.layout_record.push_back(static_cast<std::byte>(i * 7 + 1));
  }
  return header;
}

// The layout record goes after the header, under a checksum of its own; the header's own
// fields and checksum are those of a file without one, so an epochrun that knows no record
// reads the file all the same.
TEST(IntegrityHeader, ALayoutRecordRoundTripsAfterAnUnchangedHeader) {
  const auto header = with_record();
  ASSERT_TRUE(fits_user_block(2, 300, header.user_block_size));
  EXPECT_FALSE(fits_user_block(2, 4096, 4096));
  EXPECT_EQ(user_block_size_for(2, 4096), 8192U);
  const auto bytes = encode_integrity_header(header);
  const auto plain = encode_integrity_header(sample());
  const std::size_t used = 24 + 5 * 8 + 2 * 16 + 8;
  EXPECT_TRUE(std::equal(plain.begin(), plain.begin() + used, bytes.begin()));
  const auto decoded = decode_integrity_header(bytes, 10000);
  EXPECT_EQ(decoded.layout_record, header.layout_record);
  // Bound to the metadata the header's hash covers (checkpoint_judge.hpp).
  EXPECT_EQ(decoded.record_metadata_xxh64, header.metadata_xxh64);
  EXPECT_TRUE(decode_integrity_header(plain, 10000).layout_record.empty());
}

// Past its magic (whose damage leaves a file without a record: the HDF5 side is read and
// verified instead), every damaged byte of the record's head or of the record is found.
TEST(IntegrityHeader, EveryDamagedLayoutRecordByteIsRejected) {
  const auto good = encode_integrity_header(with_record());
  const std::size_t begin = 24 + 5 * 8 + 2 * 16 + 8;
  for (std::size_t at = begin; at < begin + 16 + 32 + 8 + 300; ++at) {
    auto bytes = good;
    bytes[at] ^= std::byte{0x01};
    if (at < begin + 16) {
      EXPECT_TRUE(decode_integrity_header(bytes, 10000).layout_record.empty()) << "byte " << at;
    } else {
      EXPECT_THROW(decode_integrity_header(bytes, 10000), CorruptCheckpoint) << "byte " << at;
    }
  }
}

// The encoded header with its record's head saying record version `version`, resealed.
std::vector<std::byte> with_record_version(std::uint8_t version) {
  auto bytes = encode_integrity_header(with_record());
  const std::size_t head = 24 + 5 * 8 + 2 * 16 + 8;
  bytes[head + 16] = std::byte{version};
  const auto sum = XXH64(bytes.data() + head, 16 + 24, 0);
  for (int i = 0; i < 8; ++i) {
    bytes[head + 40 + static_cast<std::size_t>(i)] =
        static_cast<std::byte>((sum >> (8 * i)) & 0xff);
  }
  return bytes;
}

// A record of a later version, intact, is left out: that file's layout is read with HDF5.
TEST(IntegrityHeader, ALayoutRecordOfALaterVersionIsLeftOut) {
  EXPECT_TRUE(decode_integrity_header(with_record_version(3), 10000).layout_record.empty());
}

// A record of version 1 (written before records carried the metadata hash) is read, but bound to
// no metadata: the judge then reads that file with HDF5.
TEST(IntegrityHeader, ALayoutRecordOfVersion1IsBoundToNoMetadata) {
  const auto decoded = decode_integrity_header(with_record_version(1), 10000);
  EXPECT_EQ(decoded.layout_record.size(), 8U + 300);
  EXPECT_FALSE(decoded.record_metadata_xxh64);
}

}  // namespace
}  // namespace epochrun
