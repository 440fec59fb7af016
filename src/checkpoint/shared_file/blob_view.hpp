// One rank's view of a blob to save, as the save's steps take it. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// One rank's view of a blob to save: its bytes must stay valid and unchanged until
// write_data() returns (the async saver passes a staged copy, the sync saver the workspace).
struct BlobView {
  std::string name;
  DType dtype = DType::kU8;
  Shape shape;
  std::span<const std::byte> bytes;
  // The bytes' xxh64 when it was computed already (the async snapshot hashes while it copies);
  // otherwise write_data computes it while the bytes stream.
  std::optional<std::uint64_t> xxh64;
  // The bytes stay unchanged until write_data returns (an asynchronous save's private copy, a
  // synchronous save's workspace): write_data may write what of them is page-aligned with direct
  // I/O (O_DIRECT), which costs the CPUs almost nothing and takes no fresh page-cache memory.
  bool direct = false;
  // The hash the bytes must have, when they are read from a copy that was hashed as it was made
  // (a node-local copy): the write hashes them as they stream and fails when they differ, so
  // that a copy changed since it was written is never committed.
  std::optional<std::uint64_t> expected_xxh64;
};

// Views of `names` in `workspace`, in that order (UsageError naming a missing blob).
std::vector<BlobView> blob_views(const Workspace& workspace, const std::vector<std::string>& names);

}  // namespace epochrun
