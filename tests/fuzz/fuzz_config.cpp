// The options of `epochrun run`: the input is an INI file (first byte even) or a command line
// of NUL-separated words (first byte odd), parsed exactly as the program parses them. Usage
// errors are expected; anything else escaping, or a crash, is a finding.
#include <unistd.h>

#include <boost/program_options/errors.hpp>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "epochrun/errors.hpp"
#include "run/run_options.hpp"

namespace {

void parse(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (auto& word : words) {
    argv.push_back(word.data());
  }
  try {
    (void)epochrun::cli::parse_run_options(static_cast<int>(argv.size()), argv.data());
  } catch (const epochrun::UsageError&) {
  } catch (const boost::program_options::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    static const std::string path =
        "/tmp/epochrun-fuzz-config-" + std::to_string(getpid()) + ".ini";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    // --help would only print; the checkpoint directory is never created by parsing.
    parse({"run", "--config", path});
    return 0;
  }
  std::vector<std::string> words = {"run"};
  std::string word;
  for (char c : text) {
    if (c == '\0') {
      words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  words.push_back(word);
  parse(words);
  return 0;
}
