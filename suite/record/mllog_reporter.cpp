#include "suite/record/mllog_reporter.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include <fmt/format.h>

#include "suite/record/json_text.h"

namespace dlscale {

namespace {

std::string value_json(const MllogEvent::Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return json_string(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else {
          return json_number(x);
        }
      },
      v);
}

}  // namespace

std::string mllog_line(const MllogEvent& e) {
  std::string metadata;
  for (const auto& [key, value] : e.metadata) {
    metadata += (metadata.empty() ? "" : ", ") + json_string(key) + ": " + value_json(value);
  }
  // MLPerf's own logger writes a namespace (empty) and the time in whole milliseconds.
  return fmt::format(
      ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {}, \"event_type\": {}, \"key\": {}, \"value\": {}, "
      "\"metadata\": {{{}}}}}",
      static_cast<int64_t>(e.time_ms), json_string(e.event_type), json_string(e.key),
      e.valueless ? std::string("null") : value_json(e.value), metadata);
}

void MllogReporter::case_finished(const CaseResult& r) {
  if (!r.accuracy) return;
  std::error_code ec;
  std::filesystem::create_directory(dir_, ec);  // --mllog accepted a new directory in an existing one
  if (ec) {
    fmt::print(stderr, "dlscale: --mllog: cannot create {}: {}\n", dir_, ec.message());
    return;
  }
  for (size_t i = 0; i < r.accuracy->mllog.size(); ++i) {
    const std::string path = fmt::format("{}/{}_case_{}_repeat_{}.log", dir_, stem_, r.group, i + 1);
    std::ofstream out(path, std::ios::trunc);
    for (const MllogEvent& e : r.accuracy->mllog[i]) out << mllog_line(e) << '\n';
    out.flush();
    if (!out) {
      fmt::print(stderr, "dlscale: --mllog: cannot write {}: {}\n", path, std::strerror(errno));
      return;
    }
  }
}

}  // namespace dlscale
