// The schema of what dlscale records, declared once per kind of record: a field table names each
// attribute (or table column) and says how it is read from the typed value it describes, and,
// for a field that is a member of a plain record, how it is set from what a file holds. The
// results-file writer, the JSON line, the readers (dlscale-project, the accuracy summary) and
// the schema test (tests/unit/test_schema.cpp, against the Python reader's names) all work from
// these tables, so a name is written in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "io/results_file.h"

namespace dlscale {

/// One attribute of a record of type T. `set` is null for a field computed from T (an enum's
/// name, a sum), which is written but never read back into T.
template <class T>
struct Field {
  const char* name;
  AttrValue (*get)(const T&);
  void (*set)(T&, const AttrValue&) = nullptr;
  const void* member = nullptr;  ///< the member's tag (member_tag below); null for a computed field
};

/// One column of a table whose rows are of type Row (`index`: the row's position). `set` reads a
/// cell back into a row; null for a column that is not read back.
template <class Row>
struct ColumnField {
  const char* name;
  AttrValue (*get)(const Row&, size_t index);
  void (*set)(Row&, const AttrValue&) = nullptr;
};

/// One data set of a group made from a record of type T.
template <class T>
struct DatasetField {
  const char* name;
  DatasetRecord (*get)(const T&, const char* name);
};

/// An attribute's value as the member type V: int64_t, double (an integer is widened),
/// std::string, or bool (an integer flag). Throws std::invalid_argument saying what V wants.
template <class V>
V attr_as(const AttrValue& v) {
  if constexpr (std::is_same_v<V, std::string>) {
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
    throw std::invalid_argument("text");
  } else if constexpr (std::is_same_v<V, double>) {
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    throw std::invalid_argument("a number");
  } else {
    static_assert(std::is_same_v<V, int64_t> || std::is_same_v<V, bool>, "a member of an unrecorded type");
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<V>(*i);
    throw std::invalid_argument(std::is_same_v<V, bool> ? "an integer flag" : "an integer");
  }
}

namespace fields_detail {

template <class C, class V>
C class_of(V C::*);

/// One address per member: how a field made by member() is found again (name_of).
template <auto M>
inline constexpr char member_tag = 0;

template <class V>
AttrValue to_attr(const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    return int64_t{v ? 1 : 0};
  } else {
    return v;
  }
}

}  // namespace fields_detail

/// The field of a plain record's member M (int64_t, double, std::string or bool, written as an
/// integer flag): read and written through the member, so a record of this kind can be read
/// back from a file as the type it was written from.
template <auto M>
constexpr Field<decltype(fields_detail::class_of(M))> member(const char* name) {
  using T = decltype(fields_detail::class_of(M));
  using V = std::remove_reference_t<decltype(std::declval<T&>().*M)>;
  return {name, [](const T& t) -> AttrValue { return fields_detail::to_attr<V>(t.*M); },
          [](T& t, const AttrValue& v) { t.*M = attr_as<V>(v); }, &fields_detail::member_tag<M>};
}

/// The column of a row's member M, read and written through it (types as member()).
template <auto M>
constexpr ColumnField<decltype(fields_detail::class_of(M))> column_member(const char* name) {
  using Row = decltype(fields_detail::class_of(M));
  using V = std::remove_reference_t<decltype(std::declval<Row&>().*M)>;
  return {name, [](const Row& r, size_t) -> AttrValue { return fields_detail::to_attr<V>(r.*M); },
          [](Row& r, const AttrValue& v) { r.*M = attr_as<V>(v); }};
}

/// The name under which a table records member M, for a reader that asks whether a file has it.
template <auto M, class Fields>
const char* name_of(const Fields& fields) {
  for (const auto& f : fields) {
    if (f.member == &fields_detail::member_tag<M>) return f.name;
  }
  throw std::logic_error("a member that its table does not record");
}

/// The one-dimensional data set of a record's member M, a vector of int64_t or double.
template <auto M>
constexpr DatasetField<decltype(fields_detail::class_of(M))> vector_member(const char* name) {
  using T = decltype(fields_detail::class_of(M));
  return {name, [](const T& t, const char* n) {
            const auto& values = t.*M;
            DatasetRecord d{n, {static_cast<uint64_t>(values.size())}, {}, {}, false};
            if constexpr (std::is_same_v<std::decay_t<decltype(values)>, std::vector<int64_t>>) {
              d.ints = values;
              d.is_int = true;
            } else {
              d.doubles = values;
            }
            return d;
          }};
}

/// A group of a record's attributes and data sets, in the tables' order.
template <class T, class Fields, class Datasets>
GroupRecord group_of(const T& value, const Fields& fields, const Datasets& datasets) {
  GroupRecord g;
  append_attrs(g.attrs, value, fields);
  for (const DatasetField<T>& d : datasets) g.datasets.push_back(d.get(value, d.name));
  return g;
}

/// A column of `values`, all of the type of `prototype`.
Column column_of(const std::string& name, const AttrValue& prototype, const std::vector<AttrValue>& values);

/// The attributes of `value`, in the table's order, appended to `out`.
template <class T, class Fields>
void append_attrs(Attrs& out, const T& value, const Fields& fields) {
  for (const Field<T>& f : fields) out.emplace_back(f.name, f.get(value));
}

/// The attributes of `value` in the table's order.
template <class T, class Fields>
Attrs attrs_of(const T& value, const Fields& fields) {
  Attrs out;
  append_attrs(out, value, fields);
  return out;
}

/// Throws std::invalid_argument: `what` ("attribute hosts") holds `value`, not `wanted` ("a number").
[[noreturn]] void wrong_type(const std::string& what, const AttrValue& value, const char* wanted);

/// Sets every member field of `into` that `attrs` holds; returns the names of those it lacks
/// (older files lack what later versions added), in the table's order. Throws
/// std::invalid_argument naming an attribute whose type is not its field's.
template <class T, class Fields>
std::vector<std::string> read_fields(const Attrs& attrs, const Fields& fields, T& into) {
  std::vector<std::string> missing;
  for (const Field<T>& f : fields) {
    if (f.set == nullptr) continue;
    bool found = false;
    for (const auto& [key, value] : attrs) {
      if (key != f.name) continue;
      try {
        f.set(into, value);
      } catch (const std::invalid_argument& wanted) {
        wrong_type(std::string("attribute ") + f.name, value, wanted.what());
      }
      found = true;
      break;
    }
    if (!found) missing.emplace_back(f.name);
  }
  return missing;
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

/// Cell `row` of a column, as the field tables hold a value.
AttrValue cell(const Column& column, size_t row);

/// The rows of a table read back through the columns' `set`; throws std::out_of_range naming a
/// column the table lacks, std::invalid_argument naming one of another type.
template <class Row, class Fields>
std::vector<Row> rows_of(const Table& table, const Fields& fields) {
  std::vector<Row> rows(table.rows());
  for (const ColumnField<Row>& f : fields) {
    if (f.set == nullptr) continue;
    const Column& column = table.column(f.name);
    for (size_t i = 0; i < rows.size(); ++i) {
      const AttrValue value = cell(column, i);
      try {
        f.set(rows[i], value);
      } catch (const std::invalid_argument& wanted) {
        wrong_type(std::string("column ") + f.name, value, wanted.what());
      }
    }
  }
  return rows;
}

}  // namespace dlscale
