// Text in XML (the SVG of `epochrun report`, the XDMF file of global arrays): the five special
// characters escaped, and control characters XML 1.0 does not allow (a name may hold any
// printable one, a value any) turned into spaces.
#pragma once

#include <string>
#include <string_view>

namespace epochrun {

std::string xml_escaped(std::string_view text);

}  // namespace epochrun
