#include "suite/record/peak_fields.h"

#include <stdexcept>

#include <fmt/format.h>

#include "io/h5.h"
#include "schema/fields.h"
#include "suite/errors.h"
#include "suite/matrix/run_matrix.h"
#include "suite/meters/wall_clock.h"

namespace dlscale {

namespace {

/// /peak/NNNN/rates: one row per rank and measurement.
const ColumnField<PeakRow> kPeakColumns[] = {
    {"kind", [](const PeakRow& r, size_t) -> AttrValue { return r.kind; }},
    {"driver", [](const PeakRow& r, size_t) -> AttrValue { return r.key.driver; }},
    {"device_type", [](const PeakRow& r, size_t) -> AttrValue { return std::string(device_name(r.key.device)); }},
    {"precision", [](const PeakRow& r, size_t) -> AttrValue { return std::string(precision_name(r.key.precision)); }},
    {"threads", [](const PeakRow& r, size_t) -> AttrValue { return int64_t{r.key.threads}; }},
    {"rank", [](const PeakRow& r, size_t) -> AttrValue { return r.rank; }},
    {"size", [](const PeakRow& r, size_t) -> AttrValue { return r.size; }},
    {"runs", [](const PeakRow& r, size_t) -> AttrValue { return r.runs; }},
    {"seconds", [](const PeakRow& r, size_t) -> AttrValue { return r.seconds; }},
    {"rate", [](const PeakRow& r, size_t) -> AttrValue { return r.rate; }},
    {"status", [](const PeakRow& r, size_t) -> AttrValue { return r.status; }},
    {"method", [](const PeakRow& r, size_t) -> AttrValue { return r.method; }},
};

}  // namespace

Table peak_table(const std::vector<PeakRow>& rows) { return table_of(rows, kPeakColumns); }

std::vector<PeakRow> peak_rows(const Table& t) {
  std::vector<PeakRow> rows(t.rows());
  for (size_t i = 0; i < rows.size(); ++i) {
    PeakRow& r = rows[i];
    r.kind = t.column("kind").strings[i];
    r.key.driver = t.column("driver").strings[i];
    r.key.device = t.column("device_type").strings[i] == "cuda" ? DeviceType::kCuda : DeviceType::kCpu;
    r.key.precision = parse_precision(t.column("precision").strings[i]);
    r.key.threads = static_cast<int>(t.column("threads").ints[i]);
    r.rank = t.column("rank").ints[i];
    r.size = t.column("size").ints[i];
    r.runs = t.column("runs").ints[i];
    r.seconds = t.column("seconds").doubles[i];
    r.rate = t.column("rate").doubles[i];
    r.status = t.column("status").strings[i];
    r.method = t.column("method").strings[i];
  }
  return rows;
}

GroupRecord peak_group(const std::vector<PeakRow>& rows, const std::string& source, double seconds) {
  GroupRecord g;
  g.attrs = {{"source", source}, {"seconds", seconds}, {"measured_utc", utc_now()}};
  g.tables.emplace_back("rates", peak_table(rows));
  return g;
}

std::vector<PeakRow> read_peak_file(const std::string& path, std::string* where) {
  try {
    const ResultsFile f = ResultsFile::open(path, false);
    const std::vector<std::string> groups = f.group_names("peak");
    if (groups.empty())
      throw UsageError(fmt::format("--peak {}: the file holds no /peak group (dlscale peak writes one)", path));
    *where = fmt::format("/peak/{} of {}", groups.back(), path);
    return peak_rows(f.read_table("peak/" + groups.back() + "/rates"));
  } catch (const h5::H5Error& e) {
    throw UsageError(fmt::format("--peak {}: {}", path, e.what()));
  } catch (const std::out_of_range& e) {
    throw UsageError(fmt::format("--peak {}: a /peak table without the expected columns ({})", path, e.what()));
  }
}

}  // namespace dlscale
