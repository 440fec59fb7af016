#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "blob_codec.hpp"
#include "epochrun/blob.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {
namespace {

TEST(Blob, IsZeroFilledWithTheShapesElementCount) {
  Blob blob(DType::kF32, {2, 3});
  EXPECT_EQ(blob.size(), 6u);
  EXPECT_EQ(blob.byte_size(), 24u);
  for (float value : blob.as<float>()) {
    EXPECT_EQ(value, 0.0f);
  }
}

// A save writes a large blob straight from its memory with direct I/O, which needs the memory
// aligned to the page; the copies and moves of a blob keep it so.
TEST(Blob, ALargeBlobStartsOnAPageBoundaryAndIsZeroFilled) {
  const auto aligned = [](const Blob& blob) {
    return reinterpret_cast<std::uintptr_t>(blob.raw().data()) % 4096 == 0;
  };
  for (const std::uint64_t bytes :
       {std::uint64_t{1} << 20, (std::uint64_t{1} << 20) + 24, std::uint64_t{64} << 20}) {
    Blob blob(DType::kU8, {bytes});
    EXPECT_TRUE(aligned(blob)) << bytes << " bytes";
    EXPECT_TRUE(std::all_of(blob.raw().begin(), blob.raw().end(),
                            [](std::byte b) { return b == std::byte{0}; }));
    blob.raw().back() = std::byte{7};
    const Blob copy(blob);
    EXPECT_TRUE(aligned(copy));
    EXPECT_EQ(copy.raw().back(), std::byte{7});
    Blob moved(DType::kU8, {1});
    moved = std::move(blob);
    EXPECT_TRUE(aligned(moved));
    EXPECT_EQ(moved.raw().back(), std::byte{7});
  }
}

TEST(Blob, ScalarHasEmptyShapeAndOneElement) {
  auto blob = Blob::scalar<std::int64_t>(42);
  EXPECT_TRUE(blob.shape().empty());
  EXPECT_EQ(blob.item<std::int64_t>(), 42);
}

TEST(Blob, TypedAccessWithTheWrongTypeThrows) {
  auto blob = Blob::scalar<double>(1.5);
  EXPECT_THROW(blob.as<float>(), UsageError);
  EXPECT_THROW(blob.item<std::int32_t>(), UsageError);
}

TEST(Blob, OfRejectsAValueCountThatDoesNotFitTheShape) {
  const std::int32_t values[] = {1, 2, 3};
  EXPECT_THROW(Blob::of<std::int32_t>({2, 2}, values), UsageError);
}

TEST(Blob, OpaqueBytesKeepTheirContent) {
  const std::byte data[] = {std::byte{0}, std::byte{255}, std::byte{7}};
  auto blob = Blob::bytes(data);
  EXPECT_EQ(blob.dtype(), DType::kBytes);
  ASSERT_EQ(blob.as<std::byte>().size(), 3u);
  EXPECT_EQ(blob.as<std::byte>()[1], std::byte{255});
}

TEST(Blob, ShapeOverflowIsRefused) {
  EXPECT_THROW(Blob(DType::kU8, {1ULL << 40, 1ULL << 40}), UsageError);
}

TEST(DType, NamesRoundTrip) {
  for (auto dtype :
       {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBytes}) {
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_THROW(parse_dtype("f16"), UsageError);
}

TEST(Workspace, NamesAreSortedAndMissingBlobsAreNamed) {
  Workspace workspace;
  workspace.put("b", Blob::scalar<float>(1));
  workspace.put("a", Blob::scalar<float>(2));
  EXPECT_EQ(workspace.names(), (std::vector<std::string>{"a", "b"}));
  try {
    workspace.get("missing");
    FAIL() << "expected an error";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("'missing'"), std::string::npos);
  }
}

TEST(BlobCodec, RoundTripsEveryDType) {
  std::map<std::string, Blob> blobs;
  const double reals[] = {1.5, -2.25};
  blobs["reals"] = Blob::of<double>({2}, reals);
  blobs["count"] = Blob::scalar<std::int32_t>(-7);
  blobs["empty"] = Blob(DType::kF32, {0, 4});
  const std::byte raw[] = {std::byte{1}, std::byte{2}};
  blobs["raw"] = Blob::bytes(raw);
  auto decoded = decode_blobs(encode_blobs(blobs));
  EXPECT_EQ(decoded, blobs);
}

TEST(BlobCodec, TruncatedBufferIsAnError) {
  std::map<std::string, Blob> blobs{{"x", Blob(DType::kF64, {16})}};
  auto buffer = encode_blobs(blobs);
  buffer.resize(buffer.size() - 8);
  EXPECT_THROW(decode_blobs(buffer), Error);
}

}  // namespace
}  // namespace epochrun
