#include "suite/record/peak_fields.h"

#include <stdexcept>

#include <fmt/format.h>

#include "io/h5.h"
#include "schema/fields.h"
#include "suite/errors.h"
#include "suite/matrix/run_matrix.h"
#include "suite/meters/wall_clock.h"
#include "suite/process/read_guard.h"

namespace dlscale {

namespace {

/// /peak/NNNN/rates: one row per rank and measurement.
const ColumnField<PeakRow> kPeakColumns[] = {
    column_member<&PeakRow::kind>("kind"),
    {"driver", [](const PeakRow& r, size_t) -> AttrValue { return r.key.driver; },
     [](PeakRow& r, const AttrValue& v) { r.key.driver = attr_as<std::string>(v); }},
    {"device_type", [](const PeakRow& r, size_t) -> AttrValue { return std::string(device_name(r.key.device)); },
     [](PeakRow& r, const AttrValue& v) {
       r.key.device = attr_as<std::string>(v) == "cuda" ? DeviceType::kCuda : DeviceType::kCpu;
     }},
    {"precision", [](const PeakRow& r, size_t) -> AttrValue { return std::string(precision_name(r.key.precision)); },
     [](PeakRow& r, const AttrValue& v) { r.key.precision = parse_precision(attr_as<std::string>(v)); }},
    {"threads", [](const PeakRow& r, size_t) -> AttrValue { return int64_t{r.key.threads}; },
     [](PeakRow& r, const AttrValue& v) { r.key.threads = static_cast<int>(attr_as<int64_t>(v)); }},
    column_member<&PeakRow::rank>("rank"),
    column_member<&PeakRow::size>("size"),
    column_member<&PeakRow::runs>("runs"),
    column_member<&PeakRow::seconds>("seconds"),
    column_member<&PeakRow::rate>("rate"),
    column_member<&PeakRow::status>("status"),
    column_member<&PeakRow::method>("method"),
};

/// /peak/NNNN's attributes: how the rows were obtained, and the run that wrote them.
struct PeakGroupAttrs {
  std::string source;  ///< "dlscale peak" or "measured by this run"
  double seconds = 0;  ///< the requested seconds per measurement
  std::string measured_utc;
  int64_t run = 0;
};

const Field<PeakGroupAttrs> kPeakGroupFields[] = {
    member<&PeakGroupAttrs::source>("source"),
    member<&PeakGroupAttrs::seconds>("seconds"),
    member<&PeakGroupAttrs::measured_utc>("measured_utc"),
    member<&PeakGroupAttrs::run>("run"),
};

}  // namespace

Table peak_table(const std::vector<PeakRow>& rows) { return table_of(rows, kPeakColumns); }

std::vector<PeakRow> peak_rows(const Table& t) { return rows_of<PeakRow>(t, kPeakColumns); }

GroupRecord peak_group(const std::vector<PeakRow>& rows, const std::string& source, double seconds, int64_t run) {
  GroupRecord g;
  g.attrs = attrs_of(PeakGroupAttrs{source, seconds, utc_now(), run}, kPeakGroupFields);
  g.tables.emplace_back("rates", peak_table(rows));
  return g;
}

std::vector<PeakRow> read_peak_file(const std::string& path, std::string* where) {
  // A damaged file can stop HDF5 inside one call for ever: the guard then ends the job, naming
  // the file, as bad input.
  const ReadGuard reading(fmt::format("dlscale: error: --peak {}", path), read_stall_seconds());
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
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--peak {}: a /peak table with a column of another type ({})", path, e.what()));
  }
}

}  // namespace dlscale
