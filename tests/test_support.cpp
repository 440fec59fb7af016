#include "test_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "epochrun/checkpoint_file.hpp"

namespace epochrun::testing {
namespace {

std::filesystem::path make_temporary_directory() {
  std::string pattern = (std::filesystem::temp_directory_path() / "epochrun-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  return pattern;
}

}  // namespace

ScratchDir::ScratchDir(const Communicator& comm) : comm_(comm) {
  std::string name;
  if (comm.is_root()) {
    name = make_temporary_directory().string();
  }
  comm.broadcast(name);
  path_ = name;
}

ScratchDir::ScratchDir() : path_(make_temporary_directory()) {}

ScratchDir::~ScratchDir() {
  if (comm_) {
    comm_->barrier();
    if (!comm_->is_root()) {
      return;
    }
  }
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

FileSizeLimit::FileSizeLimit(std::uint64_t bytes) {
  std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing us
  rlimit limit{};
  getrlimit(RLIMIT_FSIZE, &limit);
  saved_soft_limit_ = limit.rlim_cur;
  limit.rlim_cur = bytes;
  setrlimit(RLIMIT_FSIZE, &limit);
}

FileSizeLimit::~FileSizeLimit() {
  rlimit limit{};
  getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = saved_soft_limit_;
  setrlimit(RLIMIT_FSIZE, &limit);
}

TmpfsMount::TmpfsMount(const std::filesystem::path& where, const std::string& size, Access access)
    : where_(where) {
  std::filesystem::create_directories(where);
  mounted_ = ::mount("tmpfs", where.c_str(), "tmpfs", access == kReadOnly ? MS_RDONLY : 0,
                     ("size=" + size + ",mode=0755").c_str()) == 0;
}

TmpfsMount::~TmpfsMount() {
  if (mounted_) {
    ::umount2(where_.c_str(), MNT_DETACH);
  }
}

Ext4LoopMount::Ext4LoopMount(const std::filesystem::path& where, const std::string& size)
    : where_(where), image_(where.string() + ".img") {
  std::filesystem::create_directories(where);
  auto step = [&](const std::vector<std::string>& argv) {
    auto result = run_process(argv, "/");
    if (result.exit_code != 0) {
      reason_ = argv[0] + " failed: " + result.err;
    }
    return result;
  };
  if (step({"truncate", "-s", size, image_.string()}).exit_code != 0 ||
      step({"mkfs.ext4", "-q", "-F", image_.string()}).exit_code != 0) {
    return;
  }
  auto attached = step({"losetup", "-f", "--show", image_.string()});
  if (attached.exit_code != 0) {
    return;
  }
  device_ = attached.out.substr(0, attached.out.find('\n'));
  mounted_ = mount_device();
}

bool Ext4LoopMount::mount_device() {
  if (::mount(device_.c_str(), where_.c_str(), "ext4", 0, "errors=remount-ro") != 0) {
    reason_ = "mount " + device_ + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

Ext4LoopMount::~Ext4LoopMount() {
  if (mounted_) {
    ::umount2(where_.c_str(), MNT_DETACH);
  }
  if (!device_.empty()) {
    run_process({"losetup", "-d", device_}, "/");
  }
  std::error_code ignored;
  std::filesystem::remove(image_, ignored);
}

bool Ext4LoopMount::trigger_error() const {
  const auto trigger = std::filesystem::path("/sys/fs/ext4") /
                       std::filesystem::path(device_).filename() / "trigger_fs_error";
  std::ofstream out(trigger);
  out << "1\n";
  out.flush();
  return mounted_ && out.good();
}

bool Ext4LoopMount::repair_and_remount() {
  if (mounted_ && ::umount(where_.c_str()) != 0) {
    return false;
  }
  mounted_ = false;
  // e2fsck exits 1 when it fixed something: that is the expected outcome here.
  const int fixed = run_process({"e2fsck", "-f", "-y", device_}, "/").exit_code;
  mounted_ = (fixed == 0 || fixed == 1) && mount_device();
  return mounted_;
}

std::uint64_t fill_file_system(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("cannot create " + file.string());
  }
  const std::string zeros(4096, '\0');
  while (::write(fd, zeros.data(), zeros.size()) > 0) {
  }
  ::fsync(fd);
  ::close(fd);
  struct statvfs space {};
  ::statvfs(file.parent_path().c_str(), &space);
  return std::uint64_t(space.f_bavail) * space.f_frsize;
}

std::vector<std::string> ProcessResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> error_lines(const ProcessResult& result) {
  std::vector<std::string> lines;
  for (const auto& line : result.err_lines()) {
    if (line.rfind("epochrun: error:", 0) == 0) {
      lines.push_back(line);
    }
  }
  return lines;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                           const std::map<std::string, std::string>& extra_env) {
  const auto out_file = capture_ / "stdout";
  const auto err_file = capture_ / "stderr";
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null_in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || null_in < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
        ::dup2(null_in, 0) < 0 || ::chdir(cwd.c_str()) != 0) {
      ::_exit(127);
    }
    for (const auto& [key, value] : extra_env) {
      ::setenv(key.c_str(), value.c_str(), 1);
    }
    std::vector<char*> args;
    for (const auto& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    // The ranks first: a SIGKILLed mpiexec cannot take its ranks down, and a hung rank left
    // running would spin through the rest of the suite.
    for (int child : children()) {
      ::kill(child, SIGKILL);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::vector<int> ChildProcess::children() const {
  std::vector<int> pids;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) + "/children");
  for (int pid = 0; in >> pid;) {
    pids.push_back(pid);
  }
  return pids;
}

std::optional<ProcessResult> ChildProcess::wait(double timeout_seconds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;  // the destructor kills it
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reaped_ = true;
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(capture_ / "stdout");
  result.err = read_file(capture_ / "stderr");
  return result;
}

std::optional<int> wait_for_a_stopped_child(const ChildProcess& job) {
  for (int waited = 0; waited < 6000; ++waited) {
    for (int pid : job.children()) {
      const auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
      const auto state = stat.find(") ");
      if (state != std::string::npos && stat.compare(state + 2, 1, "T") == 0) {
        return pid;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::map<std::string, std::string>& extra_env) {
  ChildProcess child(argv, cwd, extra_env);
  return *child.wait(1e9);
}

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::vector<std::string> python_blocks(const std::string& markdown, const std::string& tag) {
  const std::string open = "```" + tag + "\n";
  std::vector<std::string> blocks;
  for (auto start = markdown.find(open); start != std::string::npos;
       start = markdown.find(open, start)) {
    start += open.size();
    const auto end = markdown.find("```", start);
    if (end == std::string::npos) {
      throw std::runtime_error("an unterminated python block");
    }
    blocks.push_back(markdown.substr(start, end - start));
  }
  return blocks;
}

void write_file(const std::filesystem::path& file, const std::string& content) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
}

std::string int64_bytes(std::int64_t first, std::int64_t count) {
  std::string bytes;
  for (std::int64_t value = first; value < first + count; ++value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  return bytes;
}

bool flip_bit_in_pattern(const std::filesystem::path& file, const std::string& pattern,
                         int occurrence, std::size_t offset) {
  auto bytes = read_file(file);
  auto at = bytes.find(pattern);
  for (int seen = 0; seen < occurrence && at != std::string::npos; ++seen) {
    at = bytes.find(pattern, at + 1);
  }
  if (at == std::string::npos) {
    return false;
  }
  bytes[at + offset] = static_cast<char>(bytes[at + offset] ^ 0x10);
  write_file(file, bytes);
  return true;
}

CheckpointContents read_checkpoint_contents(const std::filesystem::path& file) {
  CheckpointReader reader(file);
  CheckpointContents contents;
  for (const auto& [node, records] : reader.header().blobs) {
    for (const auto& record : records) {
      contents[node][record.name] = reader.read_blob(node, record.name);
    }
  }
  return contents;
}

CheckpointContents everything_in(const std::filesystem::path& file) {
  auto contents = read_checkpoint_contents(file);
  CheckpointReader reader(file);
  for (const auto& record : reader.header().replicated) {
    contents["(replicated)"][record.name] = reader.read_replicated(record.name);
  }
  for (const auto& record : reader.header().arrays) {
    contents["(arrays)"][record.name] = reader.read_array(record.name);
  }
  return contents;
}

std::vector<std::string> list_directory(const std::filesystem::path& directory) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace epochrun::testing

namespace epochrun {

void PrintTo(const Blob& blob, std::ostream* out) {
  *out << dtype_name(blob.dtype()) << shape_to_string(blob.shape()) << " {";
  const auto bytes = blob.raw();
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 16); ++i) {
    *out << (i ? " " : "") << std::hex << static_cast<int>(bytes[i]) << std::dec;
  }
  *out << (bytes.size() > 16 ? " ...}" : "}");
}

}  // namespace epochrun
