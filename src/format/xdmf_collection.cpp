#include "xdmf_collection.hpp"

#include <map>

#include "xml_text.hpp"

namespace epochrun {
namespace {

// XDMF's number type and precision of each dtype; `bytes` is uint8 as h5py reads it.
std::string number_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return R"(NumberType="Float" Precision="4")";
    case DType::kF64:
      return R"(NumberType="Float" Precision="8")";
    case DType::kI32:
      return R"(NumberType="Int" Precision="4")";
    case DType::kI64:
      return R"(NumberType="Int" Precision="8")";
    case DType::kU8:
    case DType::kBytes:
      break;
  }
  return R"(NumberType="UChar" Precision="1")";
}

std::string dimensions(const Shape& shape) {
  std::string text;
  for (auto extent : shape) {
    text += (text.empty() ? "" : " ") + std::to_string(extent);
  }
  return text;
}

// A uniform grid of `shape`: unit spacing from the origin, one point per element, the mesh of as
// many dimensions as the array, so that a reader selects the dataset's own extent (XDMF has no
// one-dimensional mesh: a 1-D array is a 1 x N grid). `time`: the grid's time step element, or
// nothing when the collection around it has it.
void write_grid(std::string& out, const std::string& name, const Shape& shape,
                const std::vector<const GlobalArrayRecord*>& arrays, const std::string& file,
                const std::string& indent, const std::string& time) {
  const auto points = shape.size() == 1 ? Shape{1, shape[0]} : shape;
  const bool three = points.size() == 3;
  out += indent + "<Grid Name=\"" + xml_escaped(name) + "\" GridType=\"Uniform\">\n" + time;
  out += indent + "  <Topology TopologyType=\"" + (three ? "3DCoRectMesh" : "2DCoRectMesh") +
         "\" Dimensions=\"" + dimensions(points) + "\"/>\n";
  out +=
      indent + "  <Geometry GeometryType=\"" + (three ? "ORIGIN_DXDYDZ" : "ORIGIN_DXDY") + "\">\n";
  const std::string origin = three ? "0 0 0" : "0 0";
  const std::string spacing = three ? "1 1 1" : "1 1";
  for (const auto& values : {origin, spacing}) {
    out += indent + "    <DataItem Dimensions=\"" + std::to_string(points.size()) +
           R"(" NumberType="Float" Precision="8" Format="XML">)" + values + "</DataItem>\n";
  }
  out += indent + "  </Geometry>\n";
  for (const auto* array : arrays) {
    out += indent + "  <Attribute Name=\"" + xml_escaped(array->name) +
           R"(" AttributeType="Scalar" Center="Node">)" + "\n";
    out += indent + "    <DataItem Dimensions=\"" + dimensions(array->global_shape) + "\" " +
           number_type(array->dtype) + " Format=\"HDF\">" + xml_escaped(file) + ":/arrays/" +
           xml_escaped(array->name) + "</DataItem>\n";
    out += indent + "  </Attribute>\n";
  }
  out += indent + "</Grid>\n";
}

}  // namespace

std::string xdmf_text(const std::vector<XdmfEpoch>& epochs) {
  std::string out =
      "<?xml version=\"1.0\" ?>\n"
      "<!DOCTYPE Xdmf SYSTEM \"Xdmf.dtd\" []>\n"
      "<Xdmf Version=\"2.0\">\n"
      "  <Domain>\n"
      "    <Grid Name=\"epochs\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
  for (const auto& epoch : epochs) {
    std::map<Shape, std::vector<const GlobalArrayRecord*>> by_shape;
    for (const auto& array : epoch.arrays) {
      if (!array.global_shape.empty() && array.global_shape.size() <= 3) {
        by_shape[array.global_shape].push_back(&array);
      }
    }
    if (by_shape.empty()) {
      continue;
    }
    const std::string name = "epoch " + std::to_string(epoch.epoch);
    const std::string time = "        <Time Value=\"" + std::to_string(epoch.epoch) + "\"/>\n";
    if (by_shape.size() == 1) {
      write_grid(out, name, by_shape.begin()->first, by_shape.begin()->second, epoch.file, "      ",
                 time);
      continue;
    }
    out += "      <Grid Name=\"" + name +
           "\" GridType=\"Collection\" CollectionType=\"Spatial\">\n" + time;
    for (const auto& [shape, arrays] : by_shape) {
      write_grid(out, name + " " + shape_to_string(shape), shape, arrays, epoch.file, "        ",
                 "");
    }
    out += "      </Grid>\n";
  }
  out +=
      "    </Grid>\n"
      "  </Domain>\n"
      "</Xdmf>\n";
  return out;
}

}  // namespace epochrun
