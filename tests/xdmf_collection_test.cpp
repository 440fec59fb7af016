// The XDMF text of global arrays (`inspect --xdmf`, `run --xdmf`) for what the Python tests'
// jobs do not write: 1-D and 3-D arrays, arrays of two shapes in one epoch, an array XDMF has no
// grid for, an epoch without arrays, and names XML must escape. ParaView's reading of a 2-D
// array is python/tests/test_xdmf.py's.
#include <gtest/gtest.h>

#include "xdmf_collection.hpp"

namespace epochrun::testing {
namespace {

GlobalArrayRecord array(std::string name, Shape shape, DType dtype = DType::kF64) {
  return GlobalArrayRecord{std::move(name), dtype, std::move(shape), {}, {}};
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t found = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++found;
  }
  return found;
}

TEST(XdmfCollection, OneAndThreeDimensionalArraysGetTheirMeshes) {
  const auto text = xdmf_text({{1, "a/epoch-000001.h5", {array("line", {6}, DType::kI32)}},
                               {2, "a/epoch-000002.h5", {array("cube", {2, 3, 4}, DType::kF32)}}});
  EXPECT_NE(text.find(R"(<Topology TopologyType="2DCoRectMesh" Dimensions="1 6"/>)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(<DataItem Dimensions="6" NumberType="Int" Precision="4" Format="HDF">)"
                      "a/epoch-000001.h5:/arrays/line</DataItem>"),
            std::string::npos);
  EXPECT_NE(text.find(R"(<Topology TopologyType="3DCoRectMesh" Dimensions="2 3 4"/>)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(<DataItem Dimensions="2 3 4" NumberType="Float" Precision="4")"),
            std::string::npos);
  EXPECT_EQ(count(text, "<Time Value="), 2u);
  EXPECT_NE(text.find(R"(CollectionType="Temporal")"), std::string::npos);
}

TEST(XdmfCollection, ArraysOfTwoShapesAreTwoGridsOfOneTimeStep) {
  const auto text = xdmf_text(
      {{7, "e.h5", {array("u", {4, 5}), array("v", {4, 5}), array("mask", {3}, DType::kU8)}}});
  EXPECT_EQ(count(text, R"(CollectionType="Spatial")"), 1u);
  EXPECT_EQ(count(text, R"(GridType="Uniform")"), 2u);
  EXPECT_EQ(count(text, "<Time Value=\"7\"/>"), 1u);
  EXPECT_EQ(count(text, "<Attribute "), 3u);
  EXPECT_NE(text.find(R"(NumberType="UChar" Precision="1")"), std::string::npos);
}

TEST(XdmfCollection, WhatHasNoUniformGridIsLeftOutAndNamesAreEscaped) {
  const auto text = xdmf_text({{1, "e.h5", {array("hyper", {2, 2, 2, 2})}},
                               {2, "e.h5", {}},
                               {3, "d&<\"'>.h5", {array("a&b", {2, 2})}}});
  EXPECT_EQ(text.find("hyper"), std::string::npos);
  EXPECT_EQ(count(text, "<Time Value="), 1u);
  EXPECT_NE(text.find("d&amp;&lt;&quot;&apos;&gt;.h5:/arrays/a&amp;b</DataItem>"),
            std::string::npos);
  EXPECT_NE(text.find(R"(<Attribute Name="a&amp;b")"), std::string::npos);
}

}  // namespace
}  // namespace epochrun::testing
