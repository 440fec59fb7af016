// A blob's values for people (`epochrun inspect --show`): numbers as numpy prints an array,
// opaque bytes as a hex dump; both cut short unless everything is asked for.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "epochrun/blob.hpp"

namespace epochrun::cli {

// Arrays of more elements than this are summarized (numpy's default threshold): the first and
// last three of each long axis, "..." between. Opaque blobs show this many bytes.
inline constexpr std::uint64_t kSummaryThreshold = 1000;

// numpy's str() of the array: nested brackets, elements right-aligned to a common width, rows
// wrapped at 75 columns, floats to 8 significant digits ("1." marks an integral float).
// `full`: every element, however many.
std::string format_values(const Blob& blob, bool full);

// Opaque bytes as `hexdump -C` prints them: offset, 16 bytes in hex, the printable ones as text.
std::string format_hex(const Blob& blob, bool full);

// The values as JSON: "values" (nested arrays in the blob's shape; bytes as one hex string)
// when the blob has at most kSummaryThreshold elements or `full`; otherwise "truncated": true
// and "first_values", the first kSummaryThreshold elements in a flat array (or hex string).
nlohmann::json values_json(const Blob& blob, bool full);

}  // namespace epochrun::cli
