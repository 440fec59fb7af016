// `epochrun inspect --show` prints values as numpy prints them, and `--export` writes .npy
// files numpy loads: both checked against Debian's numpy itself, not against our idea of it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "inspect/blob_values.hpp"
#include "inspect/npy_writer.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

template <typename T>
Blob array(Shape shape, std::vector<T> values) {
  return Blob::of<T>(std::move(shape), std::span<const T>(values));
}

template <typename T>
Blob arange(Shape shape) {
  std::vector<T> values(element_count(shape));
  std::iota(values.begin(), values.end(), T{0});
  return array<T>(std::move(shape), values);
}

// Deterministic values of both signs and several magnitudes, as trained weights are.
std::vector<double> weights(std::size_t count) {
  std::vector<double> values;
  for (std::size_t i = 0; i < count; ++i) {
    values.push_back(std::sin(double(i) * 1.7) * (1 + double(i % 7)) / 3);
  }
  return values;
}

std::vector<std::pair<std::string, Blob>> cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"weights", array<double>({16}, weights(16))},
      {"small_and_large", array<double>({3}, {1e-5, -2.5, 3.0})},
      {"huge_and_nan", array<double>({3}, {-1e9, 2.0, nan})},
      {"integral_floats", array<double>({4}, {1.0, 2.0, 300.0, -0.5})},
      {"infinities", array<double>({2}, {inf, -inf})},
      {"zeros", array<double>({2}, {0.0, 0.0})},
      {"long_1d", arange<double>({2000})},
      {"long_2d", arange<double>({40, 50})},
      {"wide_rows", array<double>({5, 300}, weights(1500))},
      {"wrapped_rows", array<double>({2, 12}, weights(24))},
      {"cube", arange<std::int64_t>({2, 3, 4})},
      {"ints_wrapped", arange<std::int32_t>({100})},
      {"ints_long", arange<std::int64_t>({1001})},
      {"negative_ints", array<std::int64_t>({3}, {-9000000000LL, 5, 0})},
      {"u8", arange<std::uint8_t>({20})},
      {"f32", array<float>({3}, {0.1f, 1.0f / 3, -2.0f})},
      {"scalar_sum", Blob::scalar(0.1 + 0.2)},
      {"scalar_one", Blob::scalar(1.0)},
      {"scalar_large", Blob::scalar(1e20)},
      {"scalar_f32", Blob::scalar(0.1f)},
      {"scalar_i64", Blob::scalar<std::int64_t>(-5)},
      {"empty", array<double>({0}, {})},
      {"empty_2d", array<double>({2, 0}, {})},
  };
}

// Runs numpy on every case's .npy file; returns its output for each, split at NUL.
std::vector<std::string> ask_numpy(const std::string& script, const ScratchDir& dir,
                                   std::size_t count) {
  std::vector<std::string> argv = {SYSTEM_PYTHON, "-c", script};
  for (std::size_t i = 0; i < count; ++i) {
    argv.push_back((dir / (std::to_string(i) + ".npy")).string());
  }
  ChildProcess python(argv, dir.path());
  const auto result = python.wait(120);
  if (!result || result->exit_code != 0) {
    ADD_FAILURE() << "python: " << (result ? result->err : "did not end within 120 s");
    return {};
  }
  std::vector<std::string> outputs;
  std::size_t start = 0;
  for (std::size_t end; (end = result->out.find('\0', start)) != std::string::npos;
       start = end + 1) {
    outputs.push_back(result->out.substr(start, end - start));
  }
  return outputs;
}

class InspectValues : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      cli::write_npy(dir_ / (std::to_string(i) + ".npy"), cases_[i].second);
    }
  }
  ScratchDir dir_;
  std::vector<std::pair<std::string, Blob>> cases_ = cases();
};

TEST_F(InspectValues, ArraysPrintAsNumpyPrintsThem) {
  const auto printed = ask_numpy(
      "import numpy, sys\n"
      "for f in sys.argv[1:]: sys.stdout.write(str(numpy.load(f)) + '\\0')\n",
      dir_, cases_.size());
  ASSERT_EQ(printed.size(), cases_.size());
  for (std::size_t i = 0; i < cases_.size(); ++i) {
    EXPECT_EQ(cli::format_values(cases_[i].second, false), printed[i]) << cases_[i].first;
  }
}

TEST_F(InspectValues, NpyFilesLoadWithTheBlobsDtypeShapeAndBytes) {
  const auto loaded = ask_numpy(
      "import numpy, sys\n"
      "for f in sys.argv[1:]:\n"
      "    a = numpy.load(f, allow_pickle=False)\n"
      "    sys.stdout.write('%s %s %s\\0' % (a.dtype.str, list(a.shape), a.tobytes().hex()))\n",
      dir_, cases_.size());
  ASSERT_EQ(loaded.size(), cases_.size());
  const std::map<DType, std::string> numpy_dtype = {{DType::kF32, "<f4"}, {DType::kF64, "<f8"},
                                                    {DType::kI32, "<i4"}, {DType::kI64, "<i8"},
                                                    {DType::kU8, "|u1"},  {DType::kBytes, "|u1"}};
  for (std::size_t i = 0; i < cases_.size(); ++i) {
    const auto& blob = cases_[i].second;
    std::string shape = "[";
    for (std::size_t d = 0; d < blob.shape().size(); ++d) {
      shape += (d > 0 ? ", " : "") + std::to_string(blob.shape()[d]);
    }
    std::string hex;
    for (auto byte : blob.raw()) {
      char digits[3];
      std::snprintf(digits, sizeof digits, "%02x", std::to_integer<unsigned>(byte));
      hex += digits;
    }
    EXPECT_EQ(loaded[i], numpy_dtype.at(blob.dtype()) + " " + shape + "] " + hex)
        << cases_[i].first;
  }
}

// Every .npy header is a multiple of 64 bytes long, as numpy writes them (numpy 1.x reads
// any length; aligned data lets numpy.load(mmap_mode='r') map it).
TEST_F(InspectValues, NpyHeadersAlignTheDataTo64Bytes) {
  for (const auto& [name, blob] : cases_) {
    EXPECT_EQ(cli::npy_header(blob.dtype(), blob.shape()).size() % 64, 0u) << name;
  }
}

}  // namespace
}  // namespace epochrun::testing
