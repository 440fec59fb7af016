// The alignment direct I/O (O_DIRECT) asks of a file offset, a length and a buffer: 4096
// bytes covers the logical block size of every disk and file system epochrun writes to.
#pragma once

#include <cstddef>

namespace epochrun {

inline constexpr std::size_t kDirectIoAlignment = 4096;

}  // namespace epochrun
