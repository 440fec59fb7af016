// The checkpoint metadata reader that runs before libhdf5: the integrity header decoder, the
// metadata hash and the layout record's reader over a file of arbitrary bytes. Only
// CheckpointError may come out of it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "checkpoint_layout_v3.hpp"
#include "epochrun/errors.hpp"
#include "integrity_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    (void)epochrun::decode_integrity_header(bytes, size);
  } catch (const epochrun::CheckpointError&) {
  }
  // The whole path, reading the bytes back from a file as a load does.
  static const int fd = memfd_create("checkpoint", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    return 0;
  }
  try {
    epochrun::verify_checkpoint_file(fd, "fuzzed checkpoint");
  } catch (const epochrun::CheckpointError&) {
  }
  // The bytes taken for a layout record whose checksum matched (a crafted file can make one):
  // what a load's rank 0 reads instead of HDF5, the tables it says where to find read back
  // from the same bytes.
  try {
    epochrun::IntegrityHeader header;
    header.user_block_size = 4096;
    header.file_size = size;
    header.layout_record.assign(bytes.begin(), bytes.end());
    (void)epochrun::read_checkpoint_layout_from_record(fd, header);
  } catch (const epochrun::CheckpointError&) {
  }
  return 0;
}
