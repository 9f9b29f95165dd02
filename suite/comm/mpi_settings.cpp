#include "suite/comm/mpi_settings.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace dlscale {

namespace {

template <typename T>
bool read_number(MPI_T_cvar_handle handle, std::string* out) {
  T value = 0;
  const bool ok = MPI_T_cvar_read(handle, &value) == MPI_SUCCESS;
  *out = std::to_string(value);
  return ok;
}

/// A control variable's value as text: strings as they are, integers by their enumeration item's
/// name where they have one (Open MPI's algorithm choices), sizes in decimal, booleans as true/false.
bool read_variable(int index, MPI_Datatype type, MPI_T_enum enumtype, std::string* out) {
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int elements = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &elements) != MPI_SUCCESS) return false;
  bool ok = false;
  if (type == MPI_CHAR) {
    std::string value(static_cast<size_t>(std::max(elements, 1)) + 1, '\0');
    ok = MPI_T_cvar_read(handle, value.data()) == MPI_SUCCESS;
    value.resize(value.find('\0'));
    *out = value;
  } else if (type == MPI_INT && elements == 1) {
    int value = 0;
    ok = MPI_T_cvar_read(handle, &value) == MPI_SUCCESS;
    *out = std::to_string(value);
    int items = 0;
    char enum_name[64] = {0};
    int enum_name_len = sizeof enum_name;
    if (ok && enumtype != MPI_T_ENUM_NULL &&
        MPI_T_enum_get_info(enumtype, &items, enum_name, &enum_name_len) == MPI_SUCCESS) {
      for (int i = 0; i < items; ++i) {
        int item_value = 0;
        char item[128] = {0};
        int item_len = sizeof item;
        if (MPI_T_enum_get_item(enumtype, i, &item_value, item, &item_len) == MPI_SUCCESS && item_value == value) {
          *out = item;
          break;
        }
      }
    }
  } else if (type == MPI_UNSIGNED && elements == 1) {
    ok = read_number<unsigned>(handle, out);
  } else if (type == MPI_UNSIGNED_LONG && elements == 1) {  // Open MPI's size_t variables
    ok = read_number<unsigned long>(handle, out);
  } else if (type == MPI_UNSIGNED_LONG_LONG && elements == 1) {
    ok = read_number<unsigned long long>(handle, out);
  } else if (type == MPI_C_BOOL && elements == 1) {
    int value = 0;  // Open MPI stores its booleans in an int
    ok = MPI_T_cvar_read(handle, &value) == MPI_SUCCESS;
    *out = value != 0 ? "true" : "false";
  }
  const bool freed = MPI_T_cvar_handle_free(&handle) == MPI_SUCCESS;
  return ok && freed;
}

}  // namespace

std::string mpi_control_variables(const std::vector<std::string>& names, bool skip_empty, bool* failed_out) {
  bool unused = false;
  bool* failed = failed_out != nullptr ? failed_out : &unused;
  *failed = false;
  // The thread level MPI already gives, not less: Open MPI 4.1 takes MPI_T_init_thread's level as
  // the process's (MPI_Query_thread answers it afterwards), and a lower one would leave the
  // bucketed all-reduce without its communication thread.
  int level = MPI_THREAD_SINGLE, initialized = 0, provided = 0;
  if (MPI_Initialized(&initialized) == MPI_SUCCESS && initialized != 0) MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) {
    *failed = true;
    return "";
  }
  std::map<std::string, std::string> found;
  int count = 0;
  if (MPI_T_cvar_get_num(&count) != MPI_SUCCESS) {
    count = 0;
    *failed = true;
  }
  for (int index = 0; index < count; ++index) {
    // The description is not wanted: a short buffer, which MPI_T truncates into.
    char name[256] = {0}, description[8] = {0};
    int name_len = sizeof name, description_len = sizeof description, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, description, &description_len, &bind,
                            &scope) != MPI_SUCCESS ||
        bind != MPI_T_BIND_NO_OBJECT || std::find(names.begin(), names.end(), name) == names.end()) {
      continue;
    }
    std::string value;
    if (read_variable(index, type, enumtype, &value) && !(skip_empty && value.empty())) found[name] = value;
  }
  *failed = MPI_T_finalize() != MPI_SUCCESS || *failed;
  std::string out;
  for (const std::string& n : names) {
    const auto it = found.find(n);
    if (it != found.end()) out += fmt::format("{}{}={}", out.empty() ? "" : " ", n, it->second);
  }
  return out;
}

std::string mpi_transport() {
  // The settings that pick the point-to-point layer and its network transports, and where a
  // transport may run (Open MPI's names; another MPI library has none of them).
  bool failed = false;
  const std::string set = mpi_control_variables(
      {"pml", "mtl", "btl", "btl_tcp_if_include", "btl_tcp_if_exclude", "oob_tcp_if_include"}, true, &failed);
  if (failed) return "unknown (an MPI tool interface call failed)";
  return set.empty() ? "the MPI library's own choice (no pml, mtl or btl named)" : set;
}

std::string mpi_allreduce_settings() {
  static const std::string settings = [] {
    bool failed = false;
    // Open MPI's coll/tuned (its blocking collectives between hosts): a forced algorithm counts
    // only with dynamic rules on; MPICH's selection variable.
    const std::string set =
        mpi_control_variables({"coll_tuned_use_dynamic_rules", "coll_tuned_allreduce_algorithm",
                               "coll_tuned_allreduce_algorithm_segmentsize", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"},
                              false, &failed);
    return failed ? std::string("unknown (an MPI tool interface call failed)") : set;
  }();
  return settings;
}

size_t mpi_tcp_eager_limit() {
  static const size_t limit = [] {
    const std::vector<std::string> names = {"btl_tcp_eager_limit", "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE"};
    for (const std::string& name : names) {
      const std::string set = mpi_control_variables({name});  // "name=value" or ""
      if (set.empty()) continue;
      const unsigned long long value = std::strtoull(set.c_str() + name.size() + 1, nullptr, 10);
      if (value > 0) return static_cast<size_t>(value);
    }
    return size_t{0};
  }();
  return limit;
}

}  // namespace dlscale
