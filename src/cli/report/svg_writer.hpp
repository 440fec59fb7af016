// A minimal SVG writer: rectangles, lines, text and groups with tooltips (<title>), text
// escaped for XML. Enough for epochrun's plots without a plotting library.
#pragma once

#include <string>
#include <string_view>

namespace epochrun::cli {

class SvgWriter {
 public:
  SvgWriter(double width, double height);

  // A group; `id` may be empty. Its <title> is the tooltip of everything inside.
  void begin_group(std::string_view id, std::string_view css_class, std::string_view title);
  void end_group();
  void rect(double x, double y, double width, double height, std::string_view css_class,
            std::string_view title = {});
  void line(double x1, double y1, double x2, double y2, std::string_view css_class);
  // anchor: "start", "middle" or "end".
  void text(double x, double y, std::string_view content, std::string_view css_class,
            std::string_view anchor = "start");
  // The whole document, with `style` as its stylesheet.
  std::string finish(std::string_view style);

 private:
  double width_;
  double height_;
  std::string body_;
};

}  // namespace epochrun::cli
