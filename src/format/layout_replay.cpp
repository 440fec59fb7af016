#include "layout_replay.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "hdf5_checksum.hpp"
#include "regular_file.hpp"

namespace epochrun {

namespace {

// Metadata is remembered in pages, leaving out the pages HDF5 left zero (alignment gaps).
constexpr std::uint64_t kPage = 4096;
// A lay-out whose metadata spans more than this is always made by HDF5 (a replay would copy
// more than HDF5 writes); far above any file's metadata at 100,000 ranks (docs/scaling.md).
constexpr std::uint64_t kMostRemembered = std::uint64_t{64} << 20;
// How far before the epoch attribute its object header chunk may start.
constexpr std::size_t kMostChunk = 64 << 10;

struct Region {
  std::uint64_t offset = 0;
  std::vector<std::byte> bytes;

  friend bool operator==(const Region&, const Region&) = default;
};

// A file's bytes outside its data extents and its user block, as HDF5 left them.
struct Image {
  FileDescription description;
  LayoutV3 layout;
  std::uint64_t size = 0;
  std::vector<Region> regions;
};

// Where an image holds its epoch (8 bytes, little-endian, in region `region`) and the
// checksum of the object header chunk that holds it.
struct EpochPatch {
  std::size_t region = 0;
  std::size_t epoch_at = 0;
  std::size_t chunk_begin = 0;
  std::size_t checksum_at = 0;
};

std::array<std::byte, 8> little_endian(std::int64_t value) {
  std::array<std::byte, 8> bytes{};
  // Little-endian on every machine epochrun builds for (blob_index.cpp asserts it).
  std::memcpy(bytes.data(), &value, 8);
  return bytes;
}

std::uint32_t load32(std::span<const std::byte> bytes, std::size_t at) {
  std::uint32_t value = 0;
  std::memcpy(&value, bytes.data() + at, 4);
  return value;
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

// The non-zero pages of [begin, end) of `fd`, appended to `regions`.
void remember(int fd, std::uint64_t begin, std::uint64_t end, std::vector<Region>& regions) {
  std::vector<std::byte> bytes(end - begin);
  read_at(fd, begin, bytes, "the laid-out checkpoint file");
  for (std::uint64_t at = begin; at < end;) {
    const auto page_end = std::min(end, (at / kPage + 1) * kPage);
    const std::span page(bytes.data() + (at - begin), page_end - at);
    if (!all_zero(page)) {
      if (regions.empty() || regions.back().offset + regions.back().bytes.size() != at) {
        regions.push_back({at, {}});
      }
      regions.back().bytes.insert(regions.back().bytes.end(), page.begin(), page.end());
    }
    at = page_end;
  }
}

std::optional<Image> remembered(int fd, const FileDescription& description,
                                const LayoutV3& layout) {
  Image image{description, layout, file_size(fd), {}};
  std::uint64_t at = layout.user_block_size;
  std::uint64_t total = 0;
  auto take = [&](std::uint64_t end) {
    if (end > at) {
      total += end - at;
      if (total > kMostRemembered) {
        return false;
      }
      remember(fd, at, end, image.regions);
    }
    return true;
  };
  for (const auto& extent : layout.extents) {  // sorted
    if (!take(std::min(extent.offset, image.size))) {
      return std::nullopt;
    }
    at = std::max(at, extent.offset + extent.length);
  }
  if (!take(image.size)) {
    return std::nullopt;
  }
  return image;
}

bool same_but_epoch(FileDescription a, const FileDescription& b) {
  a.epoch = b.epoch;
  return a == b;
}

// The bytes of the region that holds the epoch, rewritten for `epoch`; every other region is
// the same at every epoch (epoch_patch checked it).
std::vector<std::byte> patched(const Image& image, const EpochPatch& patch, std::int64_t epoch) {
  auto bytes = image.regions[patch.region].bytes;
  const auto value = little_endian(epoch);
  std::copy(value.begin(), value.end(),
            bytes.begin() + static_cast<std::ptrdiff_t>(patch.epoch_at));
  const auto sum = hdf5_metadata_checksum(
      std::span(bytes).subspan(patch.chunk_begin, patch.checksum_at - patch.chunk_begin));
  std::memcpy(bytes.data() + patch.checksum_at, &sum, 4);
  return bytes;
}

bool is_chunk_signature(std::span<const std::byte> bytes, std::size_t at) {
  return at + 4 <= bytes.size() && (std::memcmp(bytes.data() + at, "OHDR", 4) == 0 ||
                                    std::memcmp(bytes.data() + at, "OCHK", 4) == 0);
}

// The chunk that starts at a signature before `epoch_at` and ends at `checksum_at` in both
// images' bytes, its checksum holding in both.
std::optional<std::size_t> chunk_begin(std::span<const std::byte> a, std::span<const std::byte> b,
                                       std::size_t epoch_at, std::size_t checksum_at) {
  const auto lowest = epoch_at > kMostChunk ? epoch_at - kMostChunk : 0;
  for (auto at = epoch_at + 1; at-- > lowest;) {
    if (is_chunk_signature(a, at) &&
        hdf5_metadata_checksum(a.subspan(at, checksum_at - at)) == load32(a, checksum_at) &&
        hdf5_metadata_checksum(b.subspan(at, checksum_at - at)) == load32(b, checksum_at)) {
      return at;
    }
  }
  return std::nullopt;
}

// Which bytes the epoch changes, from two HDF5 lay-outs of one description at two epochs: the
// epoch's 8 bytes and the 4 of its chunk's checksum, and nothing else.
std::optional<EpochPatch> epoch_patch(const Image& a, const Image& b) {
  if (a.description.epoch == b.description.epoch || !same_but_epoch(a.description, b.description) ||
      !(a.layout == b.layout) || a.size != b.size || a.regions.size() != b.regions.size()) {
    return std::nullopt;
  }
  std::optional<std::size_t> region;
  std::vector<std::size_t> differing;
  for (std::size_t r = 0; r < a.regions.size(); ++r) {
    const auto& x = a.regions[r];
    const auto& y = b.regions[r];
    if (x.offset != y.offset || x.bytes.size() != y.bytes.size()) {
      return std::nullopt;
    }
    for (std::size_t i = 0; i < x.bytes.size(); ++i) {
      if (x.bytes[i] != y.bytes[i]) {
        if ((region && *region != r) || differing.size() == 12) {
          return std::nullopt;
        }
        region = r;
        differing.push_back(i);
      }
    }
  }
  if (!region) {
    return std::nullopt;
  }
  const std::span<const std::byte> x = a.regions[*region].bytes;
  const std::span<const std::byte> y = b.regions[*region].bytes;
  const auto ea = little_endian(a.description.epoch);
  const auto eb = little_endian(b.description.epoch);
  const auto first = differing.front();
  for (auto p = first >= 7 ? first - 7 : 0; p <= first; ++p) {
    if (p + 8 > x.size() || std::memcmp(x.data() + p, ea.data(), 8) != 0 ||
        std::memcmp(y.data() + p, eb.data(), 8) != 0) {
      continue;
    }
    std::vector<std::size_t> rest;
    std::copy_if(differing.begin(), differing.end(), std::back_inserter(rest),
                 [&](std::size_t i) { return i < p || i >= p + 8; });
    if (rest.empty() || rest.front() < p + 8 || rest.back() - rest.front() >= 4) {
      continue;
    }
    const auto lowest = std::max(p + 8, rest.back() >= 3 ? rest.back() - 3 : 0);
    for (auto c = lowest; c <= rest.front() && c + 4 <= x.size(); ++c) {
      if (const auto begin = chunk_begin(x, y, p, c)) {
        return EpochPatch{*region, p, *begin, c};
      }
    }
  }
  return std::nullopt;
}

// A description this process laid out through HDF5, and, once proven, where its epoch is.
struct Remembered {
  Image image;
  std::optional<EpochPatch> patch;
};

// The descriptions laid out last, newest first: a process may save more than one kind of
// checkpoint in turn (`epochrun bench --scale` does).
constexpr std::size_t kDescriptionsRemembered = 4;

struct Memory {
  std::mutex mutex;
  std::vector<Remembered> descriptions;
};

Memory& memory() {
  static Memory state;
  return state;
}

void replay(int fd, const Image& image, const EpochPatch& patch, std::int64_t epoch) {
  const std::string what = "the checkpoint file's lay-out";
  for (std::size_t r = 0; r < image.regions.size(); ++r) {
    const auto& region = image.regions[r];
    write_at(fd, region.offset, r == patch.region ? patched(image, patch, epoch) : region.bytes,
             what);
  }
  if (file_size(fd) < image.size && ::ftruncate(fd, static_cast<off_t>(image.size)) != 0) {
    throw Error(errno_message(what + ": ftruncate"));
  }
}

}  // namespace

LayoutV3 lay_out_or_replay_v3(int fd, const FileDescription& description,
                              const std::function<void()>& created) {
  auto& known = memory();
  const std::lock_guard lock(known.mutex);
  auto& descriptions = known.descriptions;
  const auto same = std::find_if(descriptions.begin(), descriptions.end(), [&](const auto& r) {
    return same_but_epoch(r.image.description, description);
  });
  if (same != descriptions.end() && same->patch) {
    created();
    replay(fd, same->image, *same->patch, description.epoch);
    return same->image.layout;
  }
  auto layout = lay_out_checkpoint_file_v3(fd, description, created);
  std::optional<Remembered> before;
  if (same != descriptions.end()) {
    before = std::move(*same);
    descriptions.erase(same);
  }
  try {
    if (auto image = remembered(fd, description, layout)) {
      Remembered now{std::move(*image), std::nullopt};
      if (before) {
        const auto patch = epoch_patch(before->image, now.image);
        // Proven only when the replay of the first rebuilds the second, byte for byte.
        if (patch && patched(before->image, *patch, description.epoch) ==
                         now.image.regions[patch->region].bytes) {
          now.patch = patch;
        }
      }
      descriptions.insert(descriptions.begin(), std::move(now));
      if (descriptions.size() > kDescriptionsRemembered) {
        descriptions.pop_back();
      }
    }
  } catch (const Error&) {
    // Only a matter of speed: this description's next lay-out is made by HDF5 again.
  }
  return layout;
}

}  // namespace epochrun
