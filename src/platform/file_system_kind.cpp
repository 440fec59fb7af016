#include "file_system_kind.hpp"

#include <linux/magic.h>
#include <sys/statfs.h>

#include <cstdio>

namespace epochrun {
namespace {

FileSystemKind kind_of(const struct statfs& about) {
  switch (static_cast<unsigned long>(about.f_type)) {
    case EXT4_SUPER_MAGIC:  // ext2, ext3 and ext4 share it
      return {"ext4", true};
    case XFS_SUPER_MAGIC:
      return {"xfs", true};
    case BTRFS_SUPER_MAGIC:
      return {"btrfs", true};
    case F2FS_SUPER_MAGIC:
      return {"f2fs", true};
    case 0x2FC12FC1UL:
      return {"zfs", true};
    case TMPFS_MAGIC:
      return {"tmpfs", true};
    case OVERLAYFS_SUPER_MAGIC:
      return {"overlay", true};
    case NFS_SUPER_MAGIC:
      return {"nfs", false};
    case 0x0BD00BD0UL:
      return {"lustre", false};
    case 0x47504653UL:
      return {"gpfs", false};
    case 0x65735546UL:
      return {"fuse", false};
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(about.f_type));
      return {hex, false};
    }
  }
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
