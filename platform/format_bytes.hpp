#pragma once
// The one way tapegrad writes a number of bytes for people: memory needs and budgets (the
// programs, Python's MemoryError), file-size limits, the model card's KV cache.
#include <string>

namespace tapegrad {

// "512 bytes" below 1 KiB; above, the largest binary unit that keeps the number at least 1,
// to three significant digits with no trailing zeros: "4 MiB", "1.5 GiB", "12.3 KiB",
// "768 MiB". A whole number of its unit is written whole, so limits read as they were set.
std::string format_bytes(double bytes);

}  // namespace tapegrad
