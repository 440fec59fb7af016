#include "file_system_kind.hpp"

#include <linux/magic.h>
#include <sys/statfs.h>

#include <cstdio>

namespace epochrun {
namespace {

// The statfs types named here: the name, and whether the file system is this host's own (ext2,
// ext3 and ext4 share EXT4_SUPER_MAGIC).
struct Known {
  unsigned long magic;
  const char* name;
  bool local;
};
constexpr Known kKnown[] = {
    {EXT4_SUPER_MAGIC, "ext4", true},
    {XFS_SUPER_MAGIC, "xfs", true},
    {BTRFS_SUPER_MAGIC, "btrfs", true},
    {F2FS_SUPER_MAGIC, "f2fs", true},
    {0x2FC12FC1UL, "zfs", true},
    {TMPFS_MAGIC, "tmpfs", true},
    {OVERLAYFS_SUPER_MAGIC, "overlay", true},
    {NFS_SUPER_MAGIC, "nfs", false},
    {0x0BD00BD0UL, "lustre", false},
    {0x47504653UL, "gpfs", false},
    {0x65735546UL, "fuse", false},
};

FileSystemKind kind_of(const struct statfs& about) {
  const auto magic = static_cast<unsigned long>(about.f_type);
  for (const auto& known : kKnown) {
    if (known.magic == magic) {
      return {known.name, known.local};
    }
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%lx", magic);
  return {hex, false};
}

}  // namespace

FileSystemKind file_system_kind(int fd) {
  struct statfs about {};
  return ::fstatfs(fd, &about) == 0 ? kind_of(about) : FileSystemKind{"unknown", false};
}

FileSystemKind file_system_kind(const std::filesystem::path& path) {
  struct statfs about {};
  return ::statfs(path.c_str(), &about) == 0 ? kind_of(about) : FileSystemKind{"unknown", false};
}

}  // namespace epochrun
