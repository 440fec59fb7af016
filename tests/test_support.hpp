// Helpers shared by the test suites: scratch directories (shared by all ranks or private to
// one), and running a program as a separate process.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::testing {

// A fresh directory under /tmp, removed on destruction.
class ScratchDir {
 public:
  // One directory for every rank of `comm` (rank 0 creates it and broadcasts the name); the
  // constructor and destructor are collective.
  explicit ScratchDir(const Communicator& comm);
  // A directory of this process alone.
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
  std::optional<Communicator> comm_;
};

// RAII: a per-process file size limit (ulimit -f), so that saves of this rank must fail.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(std::uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  std::uint64_t saved_soft_limit_;
};

// RAII: a real size-limited file system (tmpfs, size=...) mounted at `where` (created when
// missing), unmounted on destruction. Needs root, as the suite runs here and in CI; mounted()
// is false where it cannot mount, and the test then skips.
class TmpfsMount {
 public:
  // kReadOnly: mounted read-only, as a node whose node-local storage is.
  enum Access { kReadWrite, kReadOnly };
  TmpfsMount(const std::filesystem::path& where, const std::string& size,
             Access access = kReadWrite);
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }

 private:
  std::filesystem::path where_;
  bool mounted_ = false;
};

// RAII: a real ext4 file system of `size` ("32M") in an image file, attached to a loop device
// and mounted at `where` with errors=remount-ro, as many clusters mount their scratch disks;
// detached and removed on destruction. Needs root and loop devices; mounted() is false where it
// cannot mount (`reason()` says why), and the test then skips.
class Ext4LoopMount {
 public:
  Ext4LoopMount(const std::filesystem::path& where, const std::string& size);
  ~Ext4LoopMount();
  Ext4LoopMount(const Ext4LoopMount&) = delete;
  Ext4LoopMount& operator=(const Ext4LoopMount&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& reason() const { return reason_; }
  // Makes the kernel record a file system error (/sys/fs/ext4/<dev>/trigger_fs_error), as a
  // failing disk would: the file system turns read-only at once. False when it cannot.
  bool trigger_error() const;
  // Unmounts, repairs (e2fsck -fy) and mounts again read-write: the disk after an admin's fix.
  bool repair_and_remount();

 private:
  bool mount_device();

  std::filesystem::path where_;
  std::filesystem::path image_;
  std::string device_;
  std::string reason_;
  bool mounted_ = false;
};

// Writes zeros to `file` until its file system is full (ENOSPC), as another process on a
// shared disk would; returns the free bytes left afterwards (0 on tmpfs).
std::uint64_t fill_file_system(const std::filesystem::path& file);

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> err_lines() const;
};

// The lines of `result.err` that are epochrun's one-line errors ("epochrun: error: ...").
std::vector<std::string> error_lines(const ProcessResult& result);

// A program started in the background, its stdout and stderr captured to files.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
               const std::map<std::string, std::string>& extra_env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const { return pid_; }
  // The direct children (mpiexec's ranks), read from /proc.
  std::vector<int> children() const;
  // Waits at most `timeout_seconds`; nullopt when it was still running (the destructor then
  // kills it and its direct children, the ranks).
  std::optional<ProcessResult> wait(double timeout_seconds);

 private:
  ScratchDir capture_;
  int pid_ = -1;
  bool reaped_ = false;
};

// The first of the job's direct children (its ranks) that is stopped (SIGSTOP; state T in
// /proc/<pid>/stat), waiting at most 60 s; nullopt when none stopped.
std::optional<int> wait_for_a_stopped_child(const ChildProcess& job);

// Runs `argv` in `cwd` with `extra_env` added to this process's environment; waits for it.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::map<std::string, std::string>& extra_env = {});

std::string read_file(const std::filesystem::path& file);
// The code of every ```python block of a Markdown document, in order; std::runtime_error for an
// unterminated block. `tag`: the blocks whose fence says ```<tag> instead ("python v2": the
// snippets that read a version 2 file).
std::vector<std::string> python_blocks(const std::string& markdown,
                                       const std::string& tag = "python");
void write_file(const std::filesystem::path& file, const std::string& content);

// The bytes of the int64 values first, first+1, ... (count of them), little-endian: how an
// i64 blob's data lies in a checkpoint file, so a test can find and damage it.
std::string int64_bytes(std::int64_t first, std::int64_t count);
// Flips one bit `offset` bytes into the `occurrence`-th (0-based) place `pattern` occurs in
// `file`; returns false when there is no such place.
bool flip_bit_in_pattern(const std::filesystem::path& file, const std::string& pattern,
                         int occurrence, std::size_t offset);
// Every node's blobs of a checkpoint file: node name -> blob name -> blob.
using CheckpointContents = std::map<std::string, std::map<std::string, Blob>>;
CheckpointContents read_checkpoint_contents(const std::filesystem::path& file);
// Every blob of a version 3 checkpoint: per-node blobs under their node, replicated blobs under
// "(replicated)", global arrays read whole under "(arrays)".
CheckpointContents everything_in(const std::filesystem::path& file);

// Names of the entries of a directory, sorted (empty when it does not exist).
std::vector<std::string> list_directory(const std::filesystem::path& directory);

}  // namespace epochrun::testing

namespace epochrun {
// How gtest shows a Blob in a failed comparison: dtype, shape and the first values.
void PrintTo(const Blob& blob, std::ostream* out);
}  // namespace epochrun
