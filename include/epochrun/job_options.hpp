// A job's options, declared by the job without any option-parsing library: each binds a key
// (without the "<job>." prefix) to a variable whose value at declaration is the default. The
// program turns them into command-line flags `--<job>.<key>` and keys of the INI section
// `[<job>]`, and writes the parsed values into the variables before the job is built.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"

namespace epochrun {

class JobOptions {
 public:
  // Where a parsed value goes: one of the supported option types.
  using Target = std::variant<std::int64_t*, std::uint64_t*, double*, std::string*, bool*>;

  struct Option {
    std::string key;
    Target target;
    std::string help;
  };

  // Binds `key` to `*target`; the current value of *target is the default. The variable must
  // outlive the parse (it is usually a member of an options struct the job's factory owns).
  // Throws UsageError for an invalid or repeated key.
  template <typename T>
  void add(std::string key, T* target, std::string help) {
    static_assert(std::is_constructible_v<Target, T*>,
                  "a job option is std::int64_t, std::uint64_t, double, std::string or bool");
    validate_name(key, "job option key");
    for (const auto& option : options_) {
      if (option.key == key) {
        throw UsageError("job option '" + key + "' is declared twice");
      }
    }
    options_.push_back(Option{std::move(key), Target(target), std::move(help)});
  }

  // In declaration order.
  const std::vector<Option>& all() const { return options_; }

 private:
  std::vector<Option> options_;
};

}  // namespace epochrun
