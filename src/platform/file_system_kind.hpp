// Which file system a file is on, from its statfs type. Internal to the library.
#pragma once

#include <filesystem>
#include <string>

namespace epochrun {

struct FileSystemKind {
  // "ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "overlay", "nfs", "lustre", "gpfs", "fuse",
  // the type number in hexadecimal for any other, "unknown" when it cannot be asked.
  std::string name;
  // One of this host's own disks (or its memory): no other host writes to it around this
  // host's page cache. False for a network or FUSE file system, and for any unknown one.
  bool local = false;
};

FileSystemKind file_system_kind(int fd);
FileSystemKind file_system_kind(const std::filesystem::path& path);

}  // namespace epochrun
