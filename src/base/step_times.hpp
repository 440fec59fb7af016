// Where one rank's time goes in the steps of a save or a load, for `epochrun bench --scale`:
// each agreed step adds its own work and the agreement after it, a few lines per save. Off
// unless a bench turns it on, and then only on the thread that turned it on (a background
// save's steps on the job's main thread are not mixed with another thread's).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace epochrun::step_times {

using Clock = std::chrono::steady_clock;

// Starts (or stops) recording on this thread; starting clears what was recorded.
void record_on_this_thread(bool on);
bool recording();
// Adds `seconds` to `step` (steps keep the order they were first added in).
void add(const std::string& step, double seconds);
// The seconds since `since`, added to `step` when recording.
void add_since(const std::string& step, Clock::time_point since);
// What was recorded since recording started or since the last take, in order.
std::vector<std::pair<std::string, double>> take();

// Counts one call of the MPI function `call` (every checked MPI call passes here), or of
// H5Fopen (h5::open_file_read_only) or H5Fcreate (create_checkpoint_file).
void count_call(const char* call);
// The calls counted since recording started or since the last take, in order.
std::vector<std::pair<std::string, std::int64_t>> take_calls();

// While it lives, the agreed steps of this thread are recorded under `step` rather than under
// the last part of their context (which may name a file or an epoch).
class Named {
 public:
  explicit Named(std::string step);
  ~Named();
  Named(const Named&) = delete;
  Named& operator=(const Named&) = delete;

 private:
  std::string outer_;
};
// The name Named gives, or empty.
const std::string& current_name();

}  // namespace epochrun::step_times
