#include "array_path.hpp"

#include <algorithm>
#include <string_view>

namespace epochrun {

const char* array_path_name(ArrayPath path) {
  return path == ArrayPath::kDirect ? "direct" : "mpiio";
}

std::optional<std::uint64_t> contiguous_start(const Shape& global_shape, const Block& block) {
  if (block.element_count() == 0) {
    return 0;
  }
  // Row-major, a block is one run when, from the last dimension back, it spans whole dimensions
  // up to one it takes only part of, and holds a single index of every dimension before that.
  bool partial_seen = false;
  std::uint64_t first = 0;
  for (std::size_t d = 0; d < global_shape.size(); ++d) {
    first = first * global_shape[d] + block.start[d];
  }
  for (std::size_t d = global_shape.size(); d-- > 0;) {
    if (partial_seen && block.count[d] != 1) {
      return std::nullopt;
    }
    if (block.count[d] != global_shape[d]) {
      partial_seen = true;
    }
  }
  return first;
}

bool direct_writes_safe(const FileSystemKind& kind) {
  constexpr std::string_view kSafe[] = {"ext4", "xfs"};
  return kind.local && std::find(std::begin(kSafe), std::end(kSafe), kind.name) != std::end(kSafe);
}

ArrayPath choose_array_path(ArrayIo requested, const Shape& global_shape,
                            const std::vector<Block>& blocks, bool file_system_safe) {
  if (requested == ArrayIo::kMpiIo || (requested == ArrayIo::kAuto && !file_system_safe)) {
    return ArrayPath::kMpiIo;
  }
  const bool contiguous = std::all_of(blocks.begin(), blocks.end(), [&](const Block& block) {
    return contiguous_start(global_shape, block).has_value();
  });
  return contiguous ? ArrayPath::kDirect : ArrayPath::kMpiIo;
}

}  // namespace epochrun
