#include "epochrun/names.hpp"

#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// Control characters are shown escaped so the error line itself stays one clean line.
std::string printable(std::string_view name) {
  std::string shown;
  for (char c : name.substr(0, 64)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    } else {
      shown += c;
    }
  }
  return name.size() > 64 ? shown + "..." : shown;
}

}  // namespace

void validate_name(std::string_view name, std::string_view what) {
  auto reject = [&](const std::string& why) {
    throw UsageError("invalid " + std::string(what) + " '" + printable(name) + "': " + why);
  };
  if (name.empty()) {
    reject("it is empty");
  }
  if (name.size() > kMaxNameLength) {
    reject("it is " + std::to_string(name.size()) + " characters long (at most " +
           std::to_string(kMaxNameLength) + ")");
  }
  if (name == "." || name == "..") {
    reject("'.' and '..' are path components");
  }
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\') {
      reject("it contains a path separator");
    }
    if (byte < 0x20 || byte >= 0x7f) {
      reject("only printable ASCII characters are allowed");
    }
  }
}

}  // namespace epochrun
