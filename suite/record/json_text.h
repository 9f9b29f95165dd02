// JSON text for the lines dlscale prints and writes itself (`run --format json`, MLPerf logs):
// strings escaped, numbers in their shortest exact form, non-finite numbers as null.
#pragma once

#include <string>

namespace dlscale {

/// `s` as a JSON string, quoted and escaped.
std::string json_string(const std::string& s);
/// `d` as a JSON number in its shortest exact form; null when not finite.
std::string json_number(double d);

}  // namespace dlscale
