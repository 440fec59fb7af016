#include "step_times.hpp"

#include <algorithm>

namespace epochrun::step_times {
namespace {

struct Record {
  bool on = false;
  std::vector<std::pair<std::string, double>> steps;
  std::vector<std::pair<std::string, std::int64_t>> calls;
  std::string name;
};

Record& this_thread_record() {
  thread_local Record record;
  return record;
}

}  // namespace

void record_on_this_thread(bool on) {
  auto& record = this_thread_record();
  record.on = on;
  record.steps.clear();
  record.calls.clear();
}

bool recording() {
  return this_thread_record().on;
}

// Adds `amount` to the entry `key` of `entries`, appending it when new.
template <typename Amount>
void add_to(std::vector<std::pair<std::string, Amount>>& entries, std::string_view key,
            Amount amount) {
  auto found = std::find_if(entries.begin(), entries.end(),
                            [&](const auto& entry) { return entry.first == key; });
  if (found == entries.end()) {
    entries.emplace_back(std::string(key), amount);
  } else {
    found->second += amount;
  }
}

void add(const std::string& step, double seconds) {
  auto& record = this_thread_record();
  if (record.on) {
    add_to(record.steps, step, seconds);
  }
}

void count_call(const char* call) {
  auto& record = this_thread_record();
  if (record.on) {
    add_to(record.calls, call, std::int64_t{1});
  }
}

std::vector<std::pair<std::string, std::int64_t>> take_calls() {
  return std::exchange(this_thread_record().calls, {});
}

void add_since(const std::string& step, Clock::time_point since) {
  if (recording()) {
    add(step, std::chrono::duration<double>(Clock::now() - since).count());
  }
}

std::vector<std::pair<std::string, double>> take() {
  return std::exchange(this_thread_record().steps, {});
}

Named::Named(std::string step)
    : outer_(std::exchange(this_thread_record().name, std::move(step))) {}

Named::~Named() {
  this_thread_record().name = std::move(outer_);
}

const std::string& current_name() {
  return this_thread_record().name;
}

}  // namespace epochrun::step_times
