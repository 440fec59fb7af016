#include "report/svg_writer.hpp"

#include <cstdio>

#include "xml_text.hpp"

namespace epochrun::cli {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

}  // namespace

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {}

void SvgWriter::begin_group(std::string_view id, std::string_view css_class,
                            std::string_view title) {
  body_ += "<g";
  if (!id.empty()) {
    body_ += " id=\"" + xml_escaped(id) + "\"";
  }
  body_ += " class=\"" + xml_escaped(css_class) + "\"><title>" + xml_escaped(title) + "</title>\n";
}

void SvgWriter::end_group() {
  body_ += "</g>\n";
}

void SvgWriter::rect(double x, double y, double width, double height, std::string_view css_class,
                     std::string_view title) {
  body_ += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(width) +
           "\" height=\"" + number(height) + "\" class=\"" + xml_escaped(css_class) + "\"";
  body_ += title.empty() ? "/>\n" : "><title>" + xml_escaped(title) + "</title></rect>\n";
}

void SvgWriter::line(double x1, double y1, double x2, double y2, std::string_view css_class) {
  body_ += "<line x1=\"" + number(x1) + "\" y1=\"" + number(y1) + "\" x2=\"" + number(x2) +
           "\" y2=\"" + number(y2) + "\" class=\"" + xml_escaped(css_class) + "\"/>\n";
}

void SvgWriter::text(double x, double y, std::string_view content, std::string_view css_class,
                     std::string_view anchor) {
  body_ += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" class=\"" +
           xml_escaped(css_class) + "\" text-anchor=\"" + xml_escaped(anchor) + "\">" +
           xml_escaped(content) + "</text>\n";
}

std::string SvgWriter::finish(std::string_view style) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "width=\"" +
         number(width_) + "\" height=\"" + number(height_) + "\" viewBox=\"0 0 " + number(width_) +
         " " + number(height_) + "\">\n<style>" + std::string(style) + "</style>\n" +
         "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body_ +
         "</svg>\n";
}

}  // namespace epochrun::cli
