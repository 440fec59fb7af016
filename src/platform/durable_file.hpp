// Files that are either wholly there or not there at all: fsync, directory fsync, and
// write-to-temporary-then-rename. Internal to the library.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace epochrun {

// "what: strerror(errno)" for the current errno.
std::string errno_message(std::string_view what);

// Makes a rename or unlink in `directory` durable. Throws Error.
void fsync_directory(const std::filesystem::path& directory);

// mkdir -p with mode 0755 (narrowed by the umask) for every directory it creates: checkpoint
// directories are never group- or world-writable. Each created directory is fsynced into its
// parent, so that it survives a power loss. Throws Error.
void create_private_directories(const std::filesystem::path& directory);

// The commit step of every write-then-rename in epochrun: renames `temporary` over `target`
// (atomically replacing it) and fsyncs the directory so that the rename survives a crash.
// Throws Error.
void rename_durably(const std::filesystem::path& temporary, const std::filesystem::path& target);

// Makes every host's cached copy of `file` old, once every writer's bytes are durable in it:
// on a file system other hosts may write to (any but a local disk's or memory's), drops this
// host's cached pages of it (the process that laid the file out read parts of it back before
// other hosts wrote there, and its host would serve those pages for about a second more); and
// everywhere sets its modification time to now, by which the other
// hosts' clients judge whether what they cached is current (GlusterFS's quick-read compares the
// modification time only; a rename changes none of it). Throws Error.
void invalidate_cached_copies(const std::filesystem::path& file);

// A temporary name beside `target` that no committed file ever has:
// ".<target name>.tmp.<pid>.<random>", the random part 16 lowercase hexadecimal digits.
std::filesystem::path temporary_sibling(const std::filesystem::path& target);
// The target name of a name temporary_sibling made, exactly as it makes them; nullopt for
// any other name, however alike.
std::optional<std::string> temporary_target(std::string_view file_name);

// Deletes the files of `directory` whose name `is_ours` accepts, regular files only, never
// through a symlink. Returns how many. One run per directory at a time is assumed.
int remove_own_files(const std::filesystem::path& directory,
                     const std::function<bool(const std::string&)>& is_ours);
// Deletes the temporary files that an interrupted write left in `directory`: only names
// temporary_sibling made for a target name `is_ours` accepts (remove_own_files).
int remove_stale_temporaries(const std::filesystem::path& directory,
                             const std::function<bool(const std::string&)>& is_ours);

// Writes `content` to `target` atomically: temporary sibling (O_EXCL, O_NOFOLLOW, 0644 narrowed
// by the umask), fsync, rename, directory fsync. Throws Error and leaves no temporary file
// behind.
void write_file_atomically(const std::filesystem::path& target, std::string_view content);

// Appends `line` (which ends with '\n') to `file` in one write (O_APPEND: after every earlier
// line; a crash can at worst leave a torn last line, which readers skip), creating the file
// (0644 narrowed by the umask) when missing; with `sync` fsyncs it (and the directory when
// the file is new). Throws Error (also, at once, when `file` is a FIFO or anything but a
// regular file: never waits on one); a file it created is removed again on failure.
void append_line(const std::filesystem::path& file, std::string_view line, bool sync);

// Copies `source` to `target` with the same guarantees as write_file_atomically.
// `before_commit` runs once the copy is durable under its temporary name, before the rename.
void copy_file_atomically(const std::filesystem::path& source, const std::filesystem::path& target,
                          const std::function<void()>& before_commit = {});

}  // namespace epochrun
