// The checkpoint metadata reader that runs before libhdf5: the integrity header decoder and the
// metadata hash over a file of arbitrary bytes. Only CheckpointError may come out of it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

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
  return 0;
}
