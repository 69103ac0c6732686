#include <backplane/error.hpp>
#include <backplane/hub/variant.hpp>
#include <backplane/internal/device_types.hpp>

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>

namespace backplane::hub {
namespace {

const char* const kAcceptedForms =
    "expected CXXABI-BACKEND-CPU-OS (cxx11-cu130-x86_64-linux), noarch-FAMILY (noarch-cuda), or "
    "a kernel-builder build: torchXY[-CXXABI]-BACKEND-CPU-OS (torch215-cxx11-cu130-x86_64-linux), "
    "torch-stable-abiXY-BACKEND-CPU-OS, tvm-ffiXY-BACKEND-CPU-OS, torch-NAME (torch-universal); "
    "BACKEND is cpu, metal, neuron, tpu, cuXY, rocmXY, xpuXY or cannXY";

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// "130" -> 13.0: the last digit is the minor version, as the `kernels` library reads it.
std::optional<BackendVersion> packed_version(std::string_view digits) {
  if (digits.size() < 2 || digits.size() > 9 || !all_digits(digits)) return std::nullopt;
  return BackendVersion{std::stoi(std::string(digits.substr(0, digits.size() - 1))),
                        digits.back() - '0'};
}

struct VersionedFamily {
  const char* prefix;
  const char* family;
};
constexpr VersionedFamily kVersionedFamilies[] = {
    {"cu", "cuda"}, {"rocm", "rocm"}, {"xpu", "xpu"}, {"cann", "cann"}};
constexpr const char* kUnversionedBackends[] = {"cpu", "metal", "neuron", "tpu"};
constexpr const char* kGenericFamilies[] = {"cpu", "cuda",  "rocm",   "xpu", "cann",
                                            "npu", "metal", "neuron", "tpu", "universal"};

bool parse_backend(const std::string& token, BuildVariant& v) {
  for (const char* name : kUnversionedBackends) {
    if (token == name) {
      v.backend = token;
      return true;
    }
  }
  for (const VersionedFamily& f : kVersionedFamilies) {
    const std::string prefix = f.prefix;
    if (token.rfind(prefix, 0) == 0) {
      if (auto version = packed_version(std::string_view(token).substr(prefix.size()))) {
        v.backend = f.family;
        v.backend_version = version;
        return true;
      }
    }
  }
  return false;
}

std::string backend_label(const std::string& backend) {
  if (backend == "cuda") return "CUDA";
  if (backend == "rocm") return "ROCm";
  if (backend == "xpu") return "XPU";
  if (backend == "cann") return "CANN";
  return backend;
}

// The backend as the variant names it: cu130, rocm52, cpu.
std::string backend_token(const BuildVariant& v) {
  if (!v.backend_version) return v.backend;
  for (const VersionedFamily& f : kVersionedFamilies) {
    if (v.backend == f.family) {
      return f.prefix + std::to_string(v.backend_version->major) +
             std::to_string(v.backend_version->minor);
    }
  }
  return v.backend;
}

std::string system_backend_token(const SystemFacts& s) {
  BuildVariant v;
  v.backend = s.backend;
  v.backend_version = s.backend_version;
  return backend_token(v);
}

struct Refusal {
  const char* rule = "";  // VariantDecision::refused_by
  std::string reason;
  explicit operator bool() const { return !reason.empty(); }
};

std::string optional_text(const std::optional<BackendVersion>& v) {
  return v ? v->str() : "unknown";
}

// The framework's own rule (kernel-builder builds); nothing for this project's builds.
Refusal framework_refusal(const BuildVariant& v, const SystemFacts& s) {
  const std::string needs_torch =
      " (give the host's LibTorch version: SystemFacts::torch_version, kernel-hub "
      "--torch-version)";
  if (v.framework == "torch") {
    if (!s.torch_version || *v.framework_version != *s.torch_version) {
      return {"torch_version", "Torch version (" + v.framework_version->str() +
                                   ") does not match the host's Torch version (" +
                                   optional_text(s.torch_version) + ")" +
                                   (s.torch_version ? "" : needs_torch)};
    }
    if (!v.cxx_abi.empty() && v.cxx_abi != s.torch_cxx_abi.value_or("")) {
      return {"torch_cxx_abi", "Torch C++ ABI (" + v.cxx_abi +
                                   ") does not match the host Torch's C++ ABI (" +
                                   s.torch_cxx_abi.value_or("unknown") + ")"};
    }
  } else if (v.framework == "torch-stable-abi") {
    const BackendVersion& abi = *v.framework_version;
    if (!s.torch_version || abi.major > s.torch_version->major ||
        (abi.major == s.torch_version->major && abi.minor > s.torch_version->minor)) {
      return {"stable_abi", "Torch stable ABI version (" + abi.str() +
                                ") is too new for the host's Torch version (" +
                                optional_text(s.torch_version) + ")" +
                                (s.torch_version ? "" : needs_torch)};
    }
  } else if (v.framework == "tvm-ffi") {
    if (!s.tvm_ffi_version || *v.framework_version != *s.tvm_ffi_version) {
      return {"tvm_ffi", "tvm-ffi version (" + v.framework_version->str() +
                             ") does not match the host's tvm-ffi version (" +
                             optional_text(s.tvm_ffi_version) + ")"};
    }
  } else if (v.cxx_abi != s.cxx_abi) {
    return {"cxx_abi",
            "C++ ABI (" + v.cxx_abi + ") does not match this build's C++ ABI (" + s.cxx_abi + ")"};
  }
  return {};
}

// Why `v` cannot run on `s`; nothing when it can. The order of the checks is the `kernels`
// library's, so the first reason is the one it would give.
Refusal refusal(const BuildVariant& v, const SystemFacts& s) {
  if (v.kind == BuildVariant::Kind::kGeneric) {
    const std::string system_family = s.backend == "cann" ? "npu" : s.backend;
    // noarch-cann is this project's spelling of noarch-npu; the `kernels` library matches
    // torch-NAME by name, and cann's name there is npu.
    const std::string family = v.backend == "cann" && v.framework.empty() ? "npu" : v.backend;
    if (family != system_family && family != "universal") {
      return {"backend", "backend (" + v.backend + ") does not match this system's backend (" +
                             system_family + ") and is not universal"};
    }
    return {};
  }
  if (v.cpu != s.cpu) {
    return {"cpu", "CPU (" + v.cpu + ") does not match this system's CPU (" + s.cpu + ")"};
  }
  if (v.os != s.os) {
    return {"os", "OS (" + v.os + ") does not match this system's OS (" + s.os + ")"};
  }
  if (Refusal r = framework_refusal(v, s)) return r;
  const std::string mismatch = "backend (" + backend_token(v) +
                               ") does not match this system's backend (" +
                               system_backend_token(s) + ")";
  if (v.backend != s.backend) return {"backend", mismatch};
  if (v.backend_version) {
    const std::string label = backend_label(v.backend);
    if (!s.backend_version) {
      return {"backend_version",
              label + " version (" + v.backend_version->str() + ") cannot be checked: " +
                  (s.backend_version_note.empty() ? "this system's " + label + " version is unknown"
                                                  : s.backend_version_note)};
    }
    if (v.backend == "cuda") {
      if (v.backend_version->major != s.backend_version->major ||
          v.backend_version->minor > s.backend_version->minor) {
        return {"cuda_version", "CUDA version (" + v.backend_version->str() +
                                    ") is not compatible with this system's CUDA version (" +
                                    s.backend_version->str() +
                                    "): the major must be equal and the minor no newer"};
      }
    } else if (*v.backend_version != *s.backend_version) {
      return {"backend", mismatch};
    }
  }
  if (v.backend == "metal" && !v.framework.empty() &&
      (!s.macos_version || s.macos_version->major < 26)) {
    return {"metal_macos", "Metal kernels need macOS 26 or later; this system's macOS is " +
                               optional_text(s.macos_version)};
  }
  return {};
}

// Preference among accepted variants, lower first (see VariantResolution).
using Rank = std::tuple<int, int, int, int, int, std::string>;
Rank rank(const BuildVariant& v) {
  const int minor = v.backend_version ? -v.backend_version->minor : 0;
  if (v.kind == BuildVariant::Kind::kGeneric) {
    const bool universal = v.backend == "universal";
    const bool torch = !v.framework.empty();
    return {universal ? 6 + torch : 4 + torch, 0, 0, 0, 0, v.name};
  }
  if (v.framework.empty()) return {0, 0, 0, 0, minor, v.name};
  if (v.framework == "torch-stable-abi") {
    return {1, -v.framework_version->major, -v.framework_version->minor, 0, minor, v.name};
  }
  if (v.framework == "torch") return {2, 0, 0, v.cxx_abi.empty() ? 0 : 1, minor, v.name};
  return {3, 0, 0, 0, minor, v.name};  // tvm-ffi
}

std::string accepted_note(const BuildVariant& v, const SystemFacts& s) {
  if (v.kind == BuildVariant::Kind::kGeneric) {
    return v.backend == "universal" ? "a universal build (the last resort)"
                                    : "a generic build for " + v.backend;
  }
  std::string note;
  if (v.framework.empty()) {
    note = "a native build";
  } else if (v.framework == "torch") {
    note = "a Torch " + v.framework_version->str() + " build";
  } else if (v.framework == "torch-stable-abi") {
    note = "a Torch stable-ABI " + v.framework_version->str() + " build";
  } else {
    note = "a tvm-ffi " + v.framework_version->str() + " build";
  }
  note += " for " + backend_token(v) + "-" + v.cpu + "-" + v.os;
  if (v.backend == "cuda" && s.backend_version) {
    note += " (CUDA " + v.backend_version->str() + " on a system with " + s.backend_version->str() +
            ")";
  }
  return note;
}

}  // namespace

BackendVersion BackendVersion::parse(std::string_view text, std::string_view source) {
  const std::vector<std::string> parts = split(text, '.');
  if (parts.size() >= 2 && parts.size() <= 3 && all_digits(parts[0]) && all_digits(parts[1]) &&
      parts[0].size() <= 6 && parts[1].size() <= 6) {
    return BackendVersion{std::stoi(parts[0]), std::stoi(parts[1])};
  }
  throw InvalidArgument(std::string(source) + ": '" + std::string(text) +
                        "' is not a version; expected MAJOR.MINOR, e.g. 13.0");
}

BuildVariant BuildVariant::parse(std::string_view text) {
  BuildVariant v;
  v.name = std::string(text);
  const std::vector<std::string> parts = split(text, '-');
  auto fail = [&](const std::string& why) -> BuildVariant {
    throw InvalidArgument("build variant '" + std::string(text) + "': " + why + "; " +
                          kAcceptedForms);
  };
  // torchXY, torch-stable-abiXY, tvm-ffiXY: X is one digit, Y the rest (torch212 is 2.12).
  auto framework_version = [&](const std::string& token, size_t prefix, const char* form) {
    const std::string digits = token.substr(prefix);
    if (digits.size() < 2 || digits.size() > 7 || !all_digits(digits)) {
      fail("the framework '" + token + "' is not " + form);
    }
    v.framework_version = BackendVersion{digits[0] - '0', std::stoi(digits.substr(1))};
  };
  size_t next = 0;
  if (parts.size() >= 3 && parts[0] == "torch" && parts[1] == "stable" &&
      parts[2].rfind("abi", 0) == 0) {
    v.framework = "torch-stable-abi";
    framework_version(parts[2], 3, "torch-stable-abiXY (torch-stable-abi29 is ABI 2.9)");
    next = 3;
  } else if (parts.size() >= 2 && parts[0] == "torch") {
    // The `kernels` library reads everything after "torch-" as the name of a Python-only
    // build's backend, and matches it by name.
    v.kind = Kind::kGeneric;
    v.framework = "torch";
    v.backend = std::string(text.substr(6));
    if (!std::all_of(parts.begin() + 1, parts.end(), is_token)) {
      return fail("the backend name of torch-NAME must be a-z 0-9 _ -");
    }
    return v;
  } else if (parts.size() == 2 && parts[0] == "noarch") {
    v.kind = Kind::kGeneric;
    if (std::find(std::begin(kGenericFamilies), std::end(kGenericFamilies), parts[1]) ==
        std::end(kGenericFamilies)) {
      return fail("unknown generic family '" + parts[1] + "'");
    }
    v.backend = parts[1];
    return v;
  } else if (parts.size() >= 2 && parts[0] == "tvm" && parts[1].rfind("ffi", 0) == 0) {
    v.framework = "tvm-ffi";
    framework_version(parts[1], 3, "tvm-ffiXY (tvm-ffi01 is tvm-ffi 0.1)");
    next = 2;
  } else if (parts[0].rfind("torch", 0) == 0) {
    v.framework = "torch";
    framework_version(parts[0], 5, "torchXY (torch212 is Torch 2.12)");
    next = 1;
  }
  if (v.framework == "torch" && next < parts.size() &&
      (parts[next] == "cxx11" || parts[next] == "cxx98")) {
    v.cxx_abi = parts[next++];
  } else if (v.framework.empty()) {
    if (parts[0] != "cxx11" && parts[0] != "cxx98") {
      return fail("it starts with neither a C++ ABI (cxx11, cxx98) nor a framework (torchXY)");
    }
    v.cxx_abi = parts[next++];
  }
  if (parts.size() - next != 3) return fail("expected BACKEND-CPU-OS after the framework or ABI");
  if (!parse_backend(parts[next], v)) return fail("unknown backend '" + parts[next] + "'");
  v.cpu = parts[next + 1];
  v.os = parts[next + 2];
  if (!is_token(v.cpu) || !is_token(v.os)) return fail("the CPU and OS must be a-z 0-9 _");
  return v;
}

SystemFacts SystemFacts::host() {
  SystemFacts facts;
  struct utsname names {};
  if (::uname(&names) == 0) {
    facts.cpu = names.machine;
    facts.os = names.sysname;
  }
  if (facts.cpu == "arm64") facts.cpu = "aarch64";
  if (facts.cpu == "AMD64") facts.cpu = "x86_64";
  std::transform(facts.os.begin(), facts.os.end(), facts.os.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI == 0
  facts.cxx_abi = "cxx98";
#else
  facts.cxx_abi = "cxx11";
#endif
  if (facts.os == "linux") facts.torch_cxx_abi = facts.cxx_abi;
  return facts;
}

SystemFacts system_facts(const DeviceInfo& device, const std::string& hub_key) {
  SystemFacts facts = SystemFacts::host();
  const std::string key = hub_key.empty() ? device.device.type() : hub_key;
  const internal::DeviceTypeFacts* type = internal::device_type_facts(key);
  facts.backend = type != nullptr ? std::string(type->build_backend) : key;
  const char* property = facts.backend == "cuda" ? "driver_version" : "runtime_version";
  const std::string device_name = device.device.str();
  if (const Property* p = device.property(property)) {
    if (const auto* text = std::get_if<std::string>(&p->value)) {
      try {
        facts.backend_version = BackendVersion::parse(*text, device_name + " " + property);
        facts.backend_version_note = device_name + " reports " + property + " " + *text;
      } catch (const InvalidArgument& e) {
        facts.backend_version_note = e.what();
      }
    }
  }
  if (!facts.backend_version) {
    if (facts.backend_version_note.empty()) {
      facts.backend_version_note = device_name + " reports no " + property +
                                   (device.simulated ? " (a simulated device)" : "");
    }
    facts.backend_version_note +=
        "; give it with SystemFacts::backend_version (kernel-hub --backend-version)";
  }
  return facts;
}

VariantResolution resolve_variants(const std::vector<std::string>& variants,
                                   const SystemFacts& system) {
  struct Ranked {
    VariantDecision decision;
    Rank key;
  };
  std::vector<Ranked> accepted;
  std::vector<VariantDecision> refused;
  for (const std::string& name : variants) {
    BuildVariant v;
    try {
      v = BuildVariant::parse(name);
    } catch (const InvalidArgument& e) {
      refused.push_back({name, false, e.what(), "parse"});
      continue;
    }
    if (Refusal why = refusal(v, system)) {
      refused.push_back({name, false, std::move(why.reason), why.rule});
    } else {
      accepted.push_back({{name, true, accepted_note(v, system), ""}, rank(v)});
    }
  }
  std::sort(accepted.begin(), accepted.end(),
            [](const Ranked& a, const Ranked& b) { return a.key < b.key; });
  std::sort(refused.begin(), refused.end(), [](const VariantDecision& a, const VariantDecision& b) {
    return a.variant < b.variant;
  });
  VariantResolution resolution;
  for (Ranked& r : accepted) resolution.decisions.push_back(std::move(r.decision));
  for (VariantDecision& d : refused) resolution.decisions.push_back(std::move(d));
  return resolution;
}

std::string no_variant_message(const std::string& repo, const std::string& revision,
                               const VariantResolution& resolution) {
  std::string message =
      "Cannot find a build variant for this system in " + repo + " (revision: " + revision + ")";
  if (resolution.decisions.empty()) return message + "\n  (the package has no build variants)";
  for (const VariantDecision& d : resolution.decisions) {
    message += "\n  - " + d.variant + ": " + d.reason;
  }
  return message;
}

}  // namespace backplane::hub
