#include "platform/format_bytes.hpp"

#include <iterator>

#include <fmt/format.h>

namespace tapegrad {

std::string format_bytes(double bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{:.0f} bytes", bytes);
  std::size_t u = 0;
  double v = bytes / 1024;
  while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  // Fixed point, not %g: "1000 KiB" must not read "1e+03 KiB".
  std::string number = fmt::format("{:.{}f}", v, v < 10 ? 2 : v < 100 ? 1 : 0);
  if (number.find('.') != std::string::npos) {
    number.erase(number.find_last_not_of('0') + 1);
    if (number.back() == '.') number.pop_back();
  }
  return number + " " + units[u];
}

}  // namespace tapegrad
