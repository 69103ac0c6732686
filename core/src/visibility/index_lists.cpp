// Plain index lists: HABANA_VISIBLE_MODULES, MUSA_VISIBLE_DEVICES (strict),
// ASCEND_RT_VISIBLE_DEVICES, CN_VISIBLE_DEVICES / MLU_VISIBLE_DEVICES, NEURON_RT_VISIBLE_CORES.
//
// What the sources say about bad values, and so what each rule does:
// - ASCEND_RT_VISIBLE_DEVICES: Huawei's CANN environment-variable reference (envref_07_0028)
//   says IDs are comma-separated, ascending, with no other characters, and that the runtime
//   reads only the IDs before the first other character or invalid ID ("1, 2,3" gives 1;
//   "1,3,8" on 8 devices gives 1 and 3). It truncates; it does not refuse. An ID not above the
//   previous one is outside the documented form; it is treated as invalid, so it ends the list.
// - CN_VISIBLE_DEVICES / MLU_VISIBLE_DEVICES: torch_mlu's _parse_visible_devices ("keep align
//   with cnrt") and its test vectors truncate at the first non-digit entry and empty the list on a
//   repeat, as CUDA does, but accept digits only.
// - HABANA_VISIBLE_MODULES: Intel Gaudi's "Gaudi-to-process Assignment" asks for integers in
//   [0, N-1], each unique, and says nothing about other values. MUSA_VISIBLE_DEVICES: no public
//   statement found. Both are refused, with the accepted form, rather than guessed at.
// - NEURON_RT_VISIBLE_CORES: AWS Neuron runtime configuration: "a single NeuronCore index or an
//   inclusive range" (comma-separated lists are in common use); the runtime fails to start when
//   it cannot reserve the cores asked for. Refused.
#include <backplane/error.hpp>
#include <backplane/rules/visibility.hpp>

#include "text.hpp"

#include <algorithm>
#include <set>

namespace backplane {

using visibility_detail::all_digits;
using visibility_detail::all_indices;
using visibility_detail::quoted;
using visibility_detail::visible_summary;

namespace {

std::string head(std::string_view variable, std::string_view value) {
  return std::string(variable) + "=" + quoted(value) + ": ";
}

std::string range_text(int count) {
  if (count <= 0) return "no index (there is no device)";
  return "distinct indices from 0 to " + std::to_string(count - 1) +
         " separated by commas, such as '" + (count > 1 ? std::string("0,1") : std::string("0")) +
         "'";
}

// A plain decimal number, or nullopt; values too large for int become INT_MAX.
std::optional<int> plain_number(std::string_view text) {
  if (!all_digits(text)) return std::nullopt;
  const visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 10);
  if (number.overflow || number.magnitude > 0x7fffffffULL) return 0x7fffffff;
  return static_cast<int>(number.magnitude);
}

Visibility unset(std::string_view variable, int count, std::string_view what) {
  Visibility out;
  out.physical = all_indices(count);
  out.notes.push_back(std::string(variable) + " is unset, so all " + std::to_string(count) + " " +
                      std::string(what) + "s are visible");
  return out;
}

Visibility empty(std::string_view variable, std::string_view what) {
  Visibility out;
  out.variable = std::string(variable);
  out.notes.push_back(std::string(variable) + " is set but empty, so no " + std::string(what) +
                      " is visible");
  return out;
}

}  // namespace

Visibility index_list_visible(std::string_view variable, std::optional<std::string_view> value,
                              int count) {
  if (!value) return unset(variable, count, "device");
  if (value->empty()) return empty(variable, "device");
  Visibility out;
  out.variable = std::string(variable);
  const std::string where = head(variable, *value);
  for (std::string_view entry : visibility_detail::split_all(*value, ',')) {
    const std::optional<int> index = plain_number(entry);
    if (!index) {
      throw InvalidArgument(where + "entry " + quoted(entry) + " is not a device index; expected " +
                            range_text(count));
    }
    if (*index >= count) {
      throw InvalidArgument(where + "index " + std::string(entry) + " is out of range; expected " +
                            range_text(count));
    }
    if (std::find(out.physical.begin(), out.physical.end(), *index) != out.physical.end()) {
      throw InvalidArgument(where + "index " + std::string(entry) + " is listed twice; expected " +
                            range_text(count));
    }
    out.physical.push_back(*index);
  }
  out.notes.push_back(where + visible_summary(out.physical, "device"));
  return out;
}

Visibility ascend_visible(std::optional<std::string_view> value, int count) {
  constexpr const char* kVariable = "ASCEND_RT_VISIBLE_DEVICES";
  if (!value) return unset(kVariable, count, "device");
  if (value->empty()) return empty(kVariable, "device");
  Visibility out;
  out.variable = kVariable;
  const std::string where = head(kVariable, *value);
  for (std::string_view entry : visibility_detail::split_all(*value, ',')) {
    const std::optional<int> id = plain_number(entry);
    std::string why;
    if (!id) {
      why = " is not a plain device ID (digits only, no spaces)";
    } else if (*id >= count) {
      why = " is not one of the " + std::to_string(count) + " devices";
    } else if (!out.physical.empty() && *id <= out.physical.back()) {
      why = " is not above the ID before it (IDs must be ascending)";
    }
    if (!why.empty()) {
      out.notes.push_back(where + "entry " + quoted(entry) + why +
                          ", so only the IDs before it are read");
      break;
    }
    out.physical.push_back(*id);
  }
  out.notes.push_back(where + visible_summary(out.physical, "device"));
  return out;
}

Visibility mlu_visible(std::optional<std::string_view> cn_visible_devices,
                       std::optional<std::string_view> mlu_visible_devices,
                       const std::vector<std::string>& uuids) {
  const int count = static_cast<int>(uuids.size());
  std::string variable = "CN_VISIBLE_DEVICES";
  std::optional<std::string_view> value = cn_visible_devices;
  if (!value) {
    variable = "MLU_VISIBLE_DEVICES";
    value = mlu_visible_devices;
  }
  if (!value) {
    Visibility out = unset("CN_VISIBLE_DEVICES and MLU_VISIBLE_DEVICES", count, "device");
    out.notes.back() = "CN_VISIBLE_DEVICES and MLU_VISIBLE_DEVICES are unset, so all " +
                       std::to_string(count) + " devices are visible";
    return out;
  }
  Visibility out;
  out.variable = variable;
  const std::string where = head(variable, *value);
  if (cn_visible_devices && mlu_visible_devices) {
    out.notes.push_back("MLU_VISIBLE_DEVICES is ignored: CN_VISIBLE_DEVICES wins");
  }
  const std::vector<std::string_view> entries = visibility_detail::split_all(*value, ',');

  if (value->find('-') != std::string_view::npos && value->size() >= 36) {
    out.notes.push_back(where +
                        "contains '-' and has 36 characters or more, so its entries are "
                        "full UUIDs");
    std::vector<std::string_view> listed;
    for (std::string_view entry : entries) {
      if (std::find(listed.begin(), listed.end(), entry) != listed.end()) {
        out.notes.push_back(where + "entry " + quoted(entry) +
                            " is repeated, so the whole list is empty");
        return out;
      }
      if (entry.find('-') == std::string_view::npos) {
        out.notes.push_back(where + "entry " + quoted(entry) +
                            " is not a UUID, so the list ends there");
        break;
      }
      listed.push_back(entry);
    }
    for (std::string_view entry : listed) {
      const auto it = std::find(uuids.begin(), uuids.end(), entry);
      if (it == uuids.end()) {
        out.notes.push_back(where + quoted(entry) + " is no device's UUID, so the list ends there");
        break;
      }
      const int index = static_cast<int>(it - uuids.begin());
      if (std::find(out.physical.begin(), out.physical.end(), index) != out.physical.end()) {
        out.notes.push_back(where + quoted(entry) + " names device " + std::to_string(index) +
                            " a second time, so the whole list is empty");
        out.physical.clear();
        return out;
      }
      out.physical.push_back(index);
    }
  } else {
    std::vector<visibility_detail::CInteger> listed;
    for (std::string_view entry : entries) {
      const std::string_view text = visibility_detail::trim(entry);
      if (!all_digits(text)) {
        out.notes.push_back(where + "entry " + quoted(entry) +
                            " is not all digits, so the list ends there");
        break;
      }
      visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 10);
      for (const visibility_detail::CInteger& seen : listed) {
        if (seen.digits == number.digits) {
          out.notes.push_back(where + "index " + number.digits +
                              " is repeated, so the whole list is empty");
          return out;
        }
      }
      listed.push_back(std::move(number));
    }
    for (const visibility_detail::CInteger& number : listed) {
      const std::optional<int> index = visibility_detail::as_index(number, count);
      if (!index) {
        out.notes.push_back(where + "index " + number.digits + " is not one of the " +
                            std::to_string(count) + " devices, so the list ends there");
        break;
      }
      out.physical.push_back(*index);
    }
  }
  out.notes.push_back(where + visible_summary(out.physical, "device"));
  return out;
}

Visibility neuron_visible_cores(std::optional<std::string_view> value, int core_count) {
  constexpr const char* kVariable = "NEURON_RT_VISIBLE_CORES";
  if (!value) return unset(kVariable, core_count, "core");
  if (value->empty()) return empty(kVariable, "core");
  const std::string where = head(kVariable, *value);
  const std::string accepted =
      "; expected a core index, an inclusive range or a comma-separated list of them, such as "
      "'0', '0-3' or '1,3', " +
      (core_count > 0
           ? "with cores from 0 to " + std::to_string(core_count - 1) + " each listed once"
           : std::string("but there is no core to reserve"));
  std::set<int> cores;
  bool ascending = true;
  for (std::string_view entry : visibility_detail::split_all(*value, ',')) {
    const std::size_t dash = entry.find('-');
    const std::optional<int> first = plain_number(entry.substr(0, dash));
    const std::optional<int> last =
        dash == std::string_view::npos ? first : plain_number(entry.substr(dash + 1));
    if (!first || !last) {
      throw InvalidArgument(where + "entry " + quoted(entry) + " is not a core or a range" +
                            accepted);
    }
    if (*last < *first) {
      throw InvalidArgument(where + "range " + quoted(entry) + " runs backwards" + accepted);
    }
    if (*last >= core_count) {
      throw InvalidArgument(where + "core " + std::to_string(*last) + " in " + quoted(entry) +
                            " does not exist" + accepted);
    }
    for (int core = *first; core <= *last; ++core) {
      if (!cores.empty() && core < *cores.rbegin()) ascending = false;
      if (!cores.insert(core).second) {
        throw InvalidArgument(where + "core " + std::to_string(core) + " is listed twice" +
                              accepted);
      }
    }
  }
  Visibility out;
  out.variable = kVariable;
  out.physical.assign(cores.begin(), cores.end());
  if (!ascending) {
    out.notes.push_back(where +
                        "the cores are reserved as a set, so logical cores follow "
                        "ascending physical order");
  }
  out.notes.push_back(where + visible_summary(out.physical, "core"));
  return out;
}

}  // namespace backplane
