// The schema of what dlscale records, declared once per kind of record: a field table names each
// attribute (or table column) and says how it is read from the typed value it describes. The
// results-file writer, the JSON line and the schema test (tests/unit/test_schema.cpp, against
// the Python reader's keys) all work from these tables, so a name is written in one place.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "io/results_file.h"

namespace dlscale {

/// One attribute of a record of type T.
template <class T>
struct Field {
  const char* name;
  AttrValue (*get)(const T&);
};

/// One column of a table whose rows are of type Row (`index`: the row's position).
template <class Row>
struct ColumnField {
  const char* name;
  AttrValue (*get)(const Row&, size_t index);
};

/// A column of `values`, all of the type of `prototype`.
Column column_of(const std::string& name, const AttrValue& prototype, const std::vector<AttrValue>& values);

/// The attributes of `value`, in the table's order, appended to `out`.
template <class T, class Fields>
void append_attrs(Attrs& out, const T& value, const Fields& fields) {
  for (const Field<T>& f : fields) out.emplace_back(f.name, f.get(value));
}

/// The names of a field table, in order.
template <class Fields>
std::vector<std::string> field_names(const Fields& fields) {
  std::vector<std::string> names;
  for (const auto& f : fields) names.emplace_back(f.name);
  return names;
}

/// A compound table with one column per field and one record per row; a column's type is that
/// of the value its field gives for a default row, so that a table without rows has it too.
template <class Row, class Fields>
Table table_of(const std::vector<Row>& rows, const Fields& fields) {
  Table table;
  for (const ColumnField<Row>& f : fields) {
    std::vector<AttrValue> values;
    for (size_t i = 0; i < rows.size(); ++i) values.push_back(f.get(rows[i], i));
    table.columns.push_back(column_of(f.name, f.get(Row{}, 0), values));
  }
  return table;
}

}  // namespace dlscale
