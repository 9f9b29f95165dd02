#include "schema/fields.h"

#include <fmt/format.h>

namespace dlscale {

Column column_of(const std::string& name, const AttrValue& prototype, const std::vector<AttrValue>& values) {
  if (std::holds_alternative<std::string>(prototype)) {
    std::vector<std::string> v;
    for (const AttrValue& x : values) v.push_back(std::get<std::string>(x));
    return Column::of_strings(name, std::move(v));
  }
  if (std::holds_alternative<double>(prototype)) {
    std::vector<double> v;
    for (const AttrValue& x : values) v.push_back(std::get<double>(x));
    return Column::of_doubles(name, std::move(v));
  }
  std::vector<int64_t> v;
  for (const AttrValue& x : values) v.push_back(std::get<int64_t>(x));
  return Column::of_ints(name, std::move(v));
}

AttrValue cell(const Column& column, size_t row) {
  if (column.is_string) return column.strings.at(row);
  if (column.is_double) return column.doubles.at(row);
  return column.ints.at(row);
}

void wrong_type(const std::string& what, const AttrValue& value, const char* wanted) {
  const std::string held =
      std::holds_alternative<std::string>(value) ? fmt::format("the text '{}'", std::get<std::string>(value))
      : std::holds_alternative<double>(value)    ? fmt::format("the number {}", std::get<double>(value))
                                                 : fmt::format("the integer {}", std::get<int64_t>(value));
  throw std::invalid_argument(fmt::format("{} holds {}, not {}", what, held, wanted));
}

}  // namespace dlscale
