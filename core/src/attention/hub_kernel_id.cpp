// Hub kernel ids: transformers' is_kernel() pattern ^[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?$ and the
// split of integrations/hub_kernels.py load_and_register_attn_kernel (function after ':',
// revision after the first '@').
#include <backplane/error.hpp>
#include <backplane/rules/attention.hpp>

#include <algorithm>

namespace backplane {
namespace {

constexpr const char* kAcceptedForm =
    "org/repo[@revision][:function] (\"kernels-community/flash-attn2\", "
    "\"kernels-community/vllm-flash-attn3@v1:flash_attn_func\")";

bool has_separator(std::string_view part) {
  return part.find('/') != std::string_view::npos || part.find(':') != std::string_view::npos;
}

// The parts of `text`; nullopt when it does not have the form.
struct Parts {
  std::string_view org, name, revision, function;
  bool has_revision = false, has_function = false;
};

std::optional<Parts> split(std::string_view text) {
  Parts parts;
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  parts.org = text.substr(0, slash);
  std::string_view rest = text.substr(slash + 1);
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    parts.function = rest.substr(colon + 1);
    parts.has_function = true;
    rest = rest.substr(0, colon);
  }
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    parts.revision = rest.substr(at + 1);
    parts.has_revision = true;
    rest = rest.substr(0, at);
  }
  parts.name = rest;
  for (std::string_view part : {parts.org, parts.name, parts.revision, parts.function}) {
    if (has_separator(part)) return std::nullopt;
  }
  const bool empty_part = parts.org.empty() || parts.name.empty() ||
                          (parts.has_revision && parts.revision.empty()) ||
                          (parts.has_function && parts.function.empty());
  if (empty_part) return std::nullopt;
  return parts;
}

}  // namespace

// The regex lets '@' into the repo part, so "org/repo@" matches it although parse() refuses it.
bool HubKernelId::matches(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == 0 || slash == std::string_view::npos) return false;
  std::string_view rest = text.substr(slash + 1);
  std::string_view function;
  const size_t colon = rest.find(':');
  if (colon != std::string_view::npos) {
    function = rest.substr(colon + 1);
    if (function.empty() || has_separator(function)) return false;
    rest = rest.substr(0, colon);
  }
  return !rest.empty() && !has_separator(rest) && !has_separator(text.substr(0, slash));
}

HubKernelId HubKernelId::parse(std::string_view text) {
  std::optional<Parts> parts = split(text);
  if (!parts) {
    throw InvalidArgument("'" + std::string(text) + "' is not a Hub kernel id; expected " +
                          kAcceptedForm);
  }
  HubKernelId id;
  id.repo = std::string(parts->org) + "/" + std::string(parts->name);
  if (parts->has_revision) id.revision = std::string(parts->revision);
  if (parts->has_function) id.function = std::string(parts->function);
  return id;
}

std::string HubKernelId::str() const {
  std::string text = repo;
  if (revision) text += "@" + *revision;
  if (function) text += ":" + *function;
  return text;
}

}  // namespace backplane
