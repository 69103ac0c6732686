// Where a model is found from one word, as `hwprobe plan MODEL` takes it: a folder, a
// config.json, a .safetensors file, a sharded index, a module tree file, or a Hub id found in the
// local Hugging Face cache exactly as huggingface_hub finds it offline. Never the network.
#pragma once

#include <backplane/export.hpp>
#include <backplane/model/model.hpp>
#include <backplane/rules/visibility.hpp>  // EnvLookup

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace backplane {

// A Hub model id with its revision: "org/name@revision" gives {"org/name", "revision"};
// without "@", the revision is "main".
struct HubId {
  std::string repo_id;
  std::string revision = "main";
};

// `text` as a Hub id, or nullopt when it is not one: huggingface_hub's validate_repo_id (at most
// one "/"; each part 1-96 of [A-Za-z0-9_.-], not starting or ending with '-' or '.'; no "--" or
// ".."; not ending in ".git"), then an optional "@revision" (non-empty, no "..", no leading
// "/").
BACKPLANE_API std::optional<HubId> parse_hub_id(std::string_view text);

// The cache folder huggingface_hub reads: HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE,
// else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; "~"
// and $VAR / ${VAR} expanded as Python's expanduser and expandvars do (an unset variable stays
// as written). `env` returns nullopt for an unset variable.
BACKPLANE_API std::filesystem::path hub_cache_folder(const EnvLookup& env);

// What a model's files are, and so which of model_from_config, model_from_safetensors or
// model_from_tree reads them.
enum class ModelFileKind {
  kConfig,   // a config.json alone
  kWeights,  // safetensors weights (a file, an index, or a folder holding them), with the
             // config.json beside them when there is one
  kTree,     // a module tree file of tools/export-module-tree
};
BACKPLANE_API const char* to_string(ModelFileKind kind);  // "config", "weights", "tree"

struct ModelSource {
  ModelFileKind kind = ModelFileKind::kConfig;
  std::filesystem::path path;  // what the model_from_* function reads
  // Set when the model came from the Hub cache.
  std::optional<HubId> hub_id;
  std::string commit;  // the snapshot folder's name
};

// Finds `model`:
// - an existing folder: its weights (model.safetensors.index.json, else model.safetensors)
//   with its config.json, else its config.json alone;
// - an existing file: a name ending in .safetensors is weights; a JSON file whose head names
//   the format "backplane-module-tree" is a tree; one named *.index.json or whose head holds a
//   "weight_map" is a sharded index; any other is a config.json;
// - otherwise a Hub id (parse_hub_id), looked up in `hub_cache`: the revision through
//   models--org--name/refs/<revision> when that file exists (its text, as written, is the
//   commit), else the revision itself as a commit; the snapshot is
//   models--org--name/snapshots/<commit>/, then read as a folder.
// A local path wins over a Hub id of the same spelling, as transformers' from_pretrained does.
// Throws InvalidArgument naming `model` and what was looked for: a path that is neither, a
// folder without weights or config.json, an id not in the cache (naming the cache folders
// looked in and the revisions cached), a word that is neither a path nor a Hub id.
BACKPLANE_API ModelSource locate_model(std::string_view model,
                                       const std::filesystem::path& hub_cache);
// Over the process's Hub cache: hub_cache_folder of secure_getenv.
BACKPLANE_API ModelSource locate_model(std::string_view model);

// The description of the model at `source` (model_from_config, model_from_safetensors or
// model_from_tree).
BACKPLANE_API ModelDescription model_from_source(const ModelSource& source);

// locate_model over the process's Hub cache, then model_from_source.
BACKPLANE_API ModelDescription model_from_path(std::string_view model);

}  // namespace backplane
