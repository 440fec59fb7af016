#include "inspect/blob_values.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

namespace epochrun::cli {
namespace {

constexpr std::uint64_t kEdgeItems = 3;  // numpy's edgeitems
constexpr std::size_t kLineWidth = 75;   // numpy's linewidth
constexpr std::uint64_t kHexBytesShown = 256;

template <typename T>
T element(const Blob& blob, std::uint64_t index) {
  T value;
  std::memcpy(&value, blob.raw().data() + index * sizeof(T), sizeof(T));
  return value;
}

double float_element(const Blob& blob, std::uint64_t index) {
  return blob.dtype() == DType::kF32 ? element<float>(blob, index) : element<double>(blob, index);
}

std::int64_t integer_element(const Blob& blob, std::uint64_t index) {
  switch (blob.dtype()) {
    case DType::kI32:
      return element<std::int32_t>(blob, index);
    case DType::kI64:
      return element<std::int64_t>(blob, index);
    default:
      return element<std::uint8_t>(blob, index);
  }
}

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64;
}

// Trailing zeros of a fraction dropped ("0.50000000" -> "0.5", "2.00000000" -> "2.").
std::string trim_zeros(std::string text) {
  const auto end = text.find_last_not_of('0');
  return text.substr(0, end + 1);
}

// Formats the elements shown as numpy's default float and integer formatters do: every
// element of an array the same width. Floats: positional with at most 8 fractional digits,
// aligned on the point and padded with spaces, or scientific with the same number of digits
// for all when the values span more than 1e3 or lie beyond [1e-4, 1e8).
class ElementFormatter {
 public:
  ElementFormatter(const Blob& blob, const std::vector<std::uint64_t>& shown) : blob_(blob) {
    if (is_float(blob.dtype())) {
      choose_float_format(shown);
    }
    for (auto index : shown) {
      width_ = std::max(width_, unpadded(index).size());
    }
  }

  std::string text(std::uint64_t index) const {
    auto text = unpadded(index);
    return std::string(width_ - std::min(width_, text.size()), ' ') + text;
  }

 private:
  static std::string printf_text(const char* format, int precision, double value) {
    char text[64];
    std::snprintf(text, sizeof text, format, precision, value);
    return text;
  }

  // The fractional digits, at most 8, that the value needs in scientific notation.
  static std::size_t scientific_digits(double value) {
    const auto text = printf_text("%.*e", 8, value);
    const auto mantissa = trim_zeros(text.substr(0, text.find('e')));
    return mantissa.size() - mantissa.find('.') - 1;
  }

  void choose_float_format(const std::vector<std::uint64_t>& shown) {
    double max_abs = 0;
    double min_abs = 0;
    for (auto index : shown) {
      const double value = std::fabs(float_element(blob_, index));
      if (std::isfinite(value) && value != 0) {
        max_abs = std::max(max_abs, value);
        min_abs = min_abs == 0 ? value : std::min(min_abs, value);
      }
    }
    scientific_ = max_abs >= 1e8 || (min_abs > 0 && (min_abs < 1e-4 || max_abs / min_abs > 1e3));
    for (auto index : shown) {
      const double value = float_element(blob_, index);
      if (!std::isfinite(value)) {
        continue;
      }
      if (scientific_) {
        digits_ = std::max(digits_, scientific_digits(value));
      } else {
        const auto text = trim_zeros(printf_text("%.*f", 8, value));
        digits_ = std::max(digits_, text.size() - text.find('.') - 1);
      }
    }
  }

  std::string unpadded(std::uint64_t index) const {
    if (!is_float(blob_.dtype())) {
      return std::to_string(integer_element(blob_, index));
    }
    const double value = float_element(blob_, index);
    if (!std::isfinite(value)) {
      return std::isnan(value) ? "nan" : value < 0 ? "-inf" : "inf";
    }
    const int digits = static_cast<int>(digits_);
    if (scientific_) {
      return printf_text("%#.*e", digits, value);  // same digits in all; "1.e+09" for none
    }
    auto text = trim_zeros(printf_text("%.*f", 8, value));
    text.append(digits_ - (text.size() - text.find('.') - 1), ' ');  // points aligned
    return text;
  }

  const Blob& blob_;
  bool scientific_ = false;
  std::size_t digits_ = 0;  // fractional digits: the most any element needs
  std::size_t width_ = 0;
};

nlohmann::json element_json(const Blob& blob, std::uint64_t index) {
  switch (blob.dtype()) {
    case DType::kF32:
      return element<float>(blob, index);
    case DType::kF64:
      return element<double>(blob, index);
    case DType::kI32:
      return element<std::int32_t>(blob, index);
    case DType::kI64:
      return element<std::int64_t>(blob, index);
    case DType::kU8:
    case DType::kBytes:
      return element<std::uint8_t>(blob, index);
  }
  return nullptr;
}

// The indices shown along an axis of length n: all, or the edges with a gap (-1) between.
std::vector<std::int64_t> shown_indices(std::uint64_t n, bool summarize) {
  std::vector<std::int64_t> indices;
  if (!summarize || n <= 2 * kEdgeItems) {
    for (std::uint64_t i = 0; i < n; ++i) {
      indices.push_back(static_cast<std::int64_t>(i));
    }
    return indices;
  }
  for (std::uint64_t i = 0; i < kEdgeItems; ++i) {
    indices.push_back(static_cast<std::int64_t>(i));
  }
  indices.push_back(-1);
  for (std::uint64_t i = n - kEdgeItems; i < n; ++i) {
    indices.push_back(static_cast<std::int64_t>(i));
  }
  return indices;
}

// Python's repr of a float: the shortest digits that read back to the same value, positional
// for exponents from -4 to 15 ("0.1", "1.0"), scientific otherwise ("1e+20", "1.5e-05").
template <typename T>
std::string shortest_repr(T value) {
  if (!std::isfinite(value)) {
    return std::isnan(value) ? "nan" : value < 0 ? "-inf" : "inf";
  }
  char text[64];
  const auto end =
      std::to_chars(text, text + sizeof text, value, std::chars_format::scientific).ptr;
  const std::string scientific(text, end);  // "-1.2345e+02"
  const auto e = scientific.find('e');
  const int exponent = std::stoi(scientific.substr(e + 1));
  if (exponent < -4 || exponent >= 16) {
    auto mantissa = scientific.substr(0, e);
    const auto exponent_digits = std::to_string(std::abs(exponent));
    return mantissa + (exponent < 0 ? "e-" : "e+") + (exponent_digits.size() < 2 ? "0" : "") +
           exponent_digits;
  }
  const auto fixed_end =
      std::to_chars(text, text + sizeof text, value, std::chars_format::fixed).ptr;
  std::string fixed(text, fixed_end);
  return fixed.find('.') == std::string::npos ? fixed + ".0" : fixed;
}

// numpy's str() of a 0-d array: the element as Python prints it.
std::string scalar_text(const Blob& blob) {
  switch (blob.dtype()) {
    case DType::kF32:
      return shortest_repr(element<float>(blob, 0));
    case DType::kF64:
      return shortest_repr(element<double>(blob, 0));
    default:
      return std::to_string(integer_element(blob, 0));
  }
}

// numpy's array2string for an array of one or more dimensions.
class ArrayPrinter {
 public:
  ArrayPrinter(const Blob& blob, bool summarize)
      : blob_(blob),
        summarize_(summarize),
        strides_(strides(blob.shape())),
        formatter_(blob, shown_elements()) {}

  std::string print() {
    std::string out;
    print(0, 0, out);
    return out;
  }

 private:
  static std::vector<std::uint64_t> strides(const Shape& shape) {
    std::vector<std::uint64_t> strides(shape.size(), 1);
    for (std::size_t axis = shape.size(); axis-- > 1;) {
      strides[axis - 1] = strides[axis] * shape[axis];
    }
    return strides;
  }

  // The flat index of every element shown, in order.
  std::vector<std::uint64_t> shown_elements() const {
    std::vector<std::uint64_t> shown;
    std::function<void(std::size_t, std::uint64_t)> visit = [&](std::size_t axis,
                                                                std::uint64_t base) {
      for (auto i : shown_indices(blob_.shape()[axis], summarize_)) {
        if (i < 0) {
          continue;
        }
        const auto index = base + static_cast<std::uint64_t>(i) * strides_[axis];
        if (axis + 1 == blob_.shape().size()) {
          shown.push_back(index);
        } else {
          visit(axis + 1, index);
        }
      }
    };
    visit(0, 0);
    return shown;
  }

  void print(std::size_t axis, std::uint64_t base, std::string& out) {
    const auto dimensions = blob_.shape().size();
    const std::string indent(axis + 1, ' ');
    out += '[';
    if (axis + 1 == dimensions) {
      std::size_t column = axis + 1;  // the brackets before the first element
      bool first = true;
      for (auto i : shown_indices(blob_.shape()[axis], summarize_)) {
        const auto text =
            i < 0 ? std::string("...") : formatter_.text(base + static_cast<std::uint64_t>(i));
        if (!first) {
          if (column + 1 + text.size() + dimensions > kLineWidth) {
            out += '\n' + indent;
            column = indent.size();
          } else {
            out += ' ';
            ++column;
          }
        }
        out += text;
        column += text.size();
        first = false;
      }
    } else {
      const std::string separator = std::string(dimensions - axis - 1, '\n') + indent;
      bool first = true;
      for (auto i : shown_indices(blob_.shape()[axis], summarize_)) {
        if (!first) {
          out += separator;
        }
        first = false;
        if (i < 0) {
          out += "...";
          continue;
        }
        print(axis + 1, base + static_cast<std::uint64_t>(i) * strides_[axis], out);
      }
    }
    out += ']';
  }

  const Blob& blob_;
  bool summarize_;
  std::vector<std::uint64_t> strides_;
  ElementFormatter formatter_;
};

std::string hex_of(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto byte : bytes) {
    out += kDigits[std::to_integer<unsigned>(byte) >> 4];
    out += kDigits[std::to_integer<unsigned>(byte) & 15];
  }
  return out;
}

}  // namespace

std::string format_values(const Blob& blob, bool full) {
  if (blob.shape().empty()) {
    return scalar_text(blob);
  }
  if (blob.size() == 0) {
    return "[]";
  }
  return ArrayPrinter(blob, !full && blob.size() > kSummaryThreshold).print();
}

std::string format_hex(const Blob& blob, bool full) {
  const auto bytes = blob.raw();
  const auto shown = full ? bytes.size() : std::min<std::size_t>(bytes.size(), kHexBytesShown);
  std::string out;
  char text[24];
  for (std::size_t line = 0; line < shown; line += 16) {
    std::snprintf(text, sizeof text, "%08zx ", line);
    out += text;
    std::string printable;
    for (std::size_t i = line; i < line + 16; ++i) {
      if (i % 8 == 0) {
        out += ' ';
      }
      if (i < shown) {
        const auto value = std::to_integer<unsigned>(bytes[i]);
        std::snprintf(text, sizeof text, "%02x ", value);
        out += text;
        printable += std::isprint(static_cast<int>(value)) ? static_cast<char>(value) : '.';
      } else {
        out += "   ";
      }
    }
    out += " |" + printable + "|\n";
  }
  if (shown < bytes.size()) {
    out += "... " + std::to_string(bytes.size() - shown) + " more bytes (--full shows them)\n";
  }
  return out;
}

nlohmann::json values_json(const Blob& blob, bool full) {
  const bool complete = full || blob.size() <= kSummaryThreshold;
  if (blob.dtype() == DType::kBytes) {
    const auto bytes = blob.raw();
    if (complete) {
      return {{"values", hex_of(bytes)}};
    }
    return {{"truncated", true}, {"first_values", hex_of(bytes.first(kSummaryThreshold))}};
  }
  if (!complete) {
    auto first = nlohmann::json::array();
    for (std::uint64_t i = 0; i < kSummaryThreshold; ++i) {
      first.push_back(element_json(blob, i));
    }
    return {{"truncated", true}, {"first_values", first}};
  }
  // Nested arrays in the blob's shape, built from the innermost axis out.
  std::function<nlohmann::json(std::size_t, std::uint64_t, std::uint64_t)> nest =
      [&](std::size_t axis, std::uint64_t base, std::uint64_t stride) -> nlohmann::json {
    if (axis == blob.shape().size()) {
      return element_json(blob, base);
    }
    const auto inner = stride / std::max<std::uint64_t>(blob.shape()[axis], 1);
    auto values = nlohmann::json::array();
    for (std::uint64_t i = 0; i < blob.shape()[axis]; ++i) {
      values.push_back(nest(axis + 1, base + i * inner, inner));
    }
    return values;
  };
  return {{"values", nest(0, 0, blob.size())}};
}

}  // namespace epochrun::cli
