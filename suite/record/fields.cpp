#include "suite/record/fields.h"

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

}  // namespace dlscale
