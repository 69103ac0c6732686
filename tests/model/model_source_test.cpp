// Finding a model from one word (backplane/model/model_source.hpp): Hub ids as huggingface_hub
// validates them, its cache folder from the environment, and local paths and cache snapshots
// laid out as save_pretrained and huggingface_hub write them. tests/python/hub_cache_check.py
// checks the same against a cache that huggingface_hub's own functions build.
#include <backplane/error.hpp>
#include <backplane/model/model_source.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <ostream>
#include <string>

#include "temp_folder.hpp"

namespace {

using backplane::HubId;
using backplane::ModelFileKind;
using backplane::testing::TempFolder;
namespace fs = std::filesystem;

struct IdCase {
  std::string text;
  bool valid;
  std::string repo_id;
  std::string revision;
};

void PrintTo(const IdCase& c, std::ostream* os) {
  *os << "'" << c.text << "'";
}

class HubIdRule : public testing::TestWithParam<IdCase> {};

TEST_P(HubIdRule, AcceptsWhatHuggingfaceHubAccepts) {
  const IdCase& c = GetParam();
  const std::optional<HubId> id = backplane::parse_hub_id(c.text);
  ASSERT_EQ(id.has_value(), c.valid);
  if (!id) return;
  EXPECT_EQ(id->repo_id, c.repo_id);
  EXPECT_EQ(id->revision, c.revision);
}

INSTANTIATE_TEST_SUITE_P(
    Table, HubIdRule,
    testing::Values(IdCase{"meta-llama/Llama-3.1-8B", true, "meta-llama/Llama-3.1-8B", "main"},
                    IdCase{"gpt2", true, "gpt2", "main"},
                    IdCase{"Qwen/Qwen3-0.6B@v1.0", true, "Qwen/Qwen3-0.6B", "v1.0"},
                    IdCase{"org/name@refs/pr/3", true, "org/name", "refs/pr/3"},
                    IdCase{"org/name@0123456789abcdef0123456789abcdef01234567", true, "org/name",
                           "0123456789abcdef0123456789abcdef01234567"},
                    IdCase{"a/b/c", false, "", ""},            // two slashes
                    IdCase{"org/-name", false, "", ""},        // starts with '-'
                    IdCase{"org/name.", false, "", ""},        // ends with '.'
                    IdCase{"org/na--me", false, "", ""},       // "--" is the cache's separator
                    IdCase{"org/na..me", false, "", ""},       // ".."
                    IdCase{"org/name.git", false, "", ""},     // ".git"
                    IdCase{"org/na me", false, "", ""},        // a space
                    IdCase{"org/caf\xc3\xa9", false, "", ""},  // ASCII only
                    IdCase{"org/" + std::string(97, 'a'), false, "", ""},  // over 96
                    IdCase{"org/name@", false, "", ""},                    // empty revision
                    IdCase{"org/name@../../x", false, "", ""},             // leaves the cache
                    IdCase{"./model", false, "", ""}, IdCase{"", false, "", ""}));

struct CacheCase {
  std::map<std::string, std::string> env;
  std::string folder;
};

void PrintTo(const CacheCase& c, std::ostream* os) {
  for (const auto& [k, v] : c.env) *os << k << "=" << v << " ";
}

class HubCacheRule : public testing::TestWithParam<CacheCase> {};

TEST_P(HubCacheRule, IsTheFolderHuggingfaceHubReads) {
  const CacheCase& c = GetParam();
  const backplane::EnvLookup env = [&](const char* name) -> std::optional<std::string> {
    const auto it = c.env.find(name);
    return it == c.env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_EQ(backplane::hub_cache_folder(env).string(), c.folder);
}

INSTANTIATE_TEST_SUITE_P(
    Table, HubCacheRule,
    testing::Values(
        CacheCase{{{"HOME", "/home/u"}}, "/home/u/.cache/huggingface/hub"},
        CacheCase{{{"HOME", "/home/u/"}}, "/home/u/.cache/huggingface/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/x"}}, "/x/huggingface/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "/data/hf"}}, "/data/hf/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "~/hf"}}, "/home/u/hf/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "$SCRATCH/hf"}, {"SCRATCH", "/s"}},
                  "/s/hf/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "${SCRATCH}/hf"}, {"SCRATCH", "/s"}},
                  "/s/hf/hub"},
        // An unset variable stays as written, as os.path.expandvars leaves it.
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "$NOPE/hf"}}, "$NOPE/hf/hub"},
        CacheCase{{{"HOME", "/home/u"}, {"HF_HOME", "/a"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}},
                  "/legacy"},
        CacheCase{
            {{"HF_HUB_CACHE", "~/c"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}, {"HOME", "/home/u"}},
            "/home/u/c"}));

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

// A snapshot as huggingface_hub lays it out: refs/<revision> holds the commit, the files are
// links into blobs/.
fs::path cache_snapshot(const fs::path& cache, const std::string& folder, const std::string& ref,
                        const std::string& commit, const std::string& config) {
  const fs::path repo = cache / folder;
  if (!ref.empty()) write(repo / "refs" / ref, commit);
  write(repo / "blobs" / "abc123", config);
  const fs::path snapshot = repo / "snapshots" / commit;
  fs::create_directories(snapshot);
  fs::create_symlink("../../blobs/abc123", snapshot / "config.json");
  return snapshot;
}

std::string error_of(const std::string& model, const fs::path& cache) {
  try {
    backplane::locate_model(model, cache);
  } catch (const backplane::InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LocateModel, FindsASnapshotThroughItsRef) {
  TempFolder cache;
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  const fs::path snapshot =
      cache_snapshot(cache.path(), "models--org--tiny", "main", commit, R"({"model_type":"x"})");
  const backplane::ModelSource source = backplane::locate_model("org/tiny", cache.path());
  EXPECT_EQ(source.kind, ModelFileKind::kConfig);
  EXPECT_EQ(source.path, snapshot / "config.json");
  ASSERT_TRUE(source.hub_id.has_value());
  EXPECT_EQ(source.hub_id->repo_id, "org/tiny");
  EXPECT_EQ(source.hub_id->revision, "main");
  EXPECT_EQ(source.commit, commit);
  // A commit hash is its own revision, without a ref.
  EXPECT_EQ(backplane::locate_model("org/tiny@" + commit, cache.path()).commit, commit);
}

TEST(LocateModel, AnIdWithoutOrganizationUsesOneDashedPart) {
  TempFolder cache;
  cache_snapshot(cache.path(), "models--gpt2", "main", "c0ffee", "{}");
  EXPECT_EQ(backplane::locate_model("gpt2", cache.path()).commit, "c0ffee");
}

TEST(LocateModel, PrefersWeightsToTheConfigInAFolder) {
  TempFolder folder;
  write(folder.path() / "config.json", "{}");
  EXPECT_EQ(backplane::locate_model(folder.path().string(), "/nonexistent").kind,
            ModelFileKind::kConfig);
  write(folder.path() / "model.safetensors", "");
  const backplane::ModelSource source = backplane::locate_model(folder.path().string(), "/none");
  EXPECT_EQ(source.kind, ModelFileKind::kWeights);
  EXPECT_EQ(source.path, folder.path());
  EXPECT_FALSE(source.hub_id.has_value());
}

TEST(LocateModel, TellsFilesApartByNameAndHead) {
  TempFolder folder;
  const struct {
    std::string name;
    std::string text;
    ModelFileKind kind;
  } files[] = {
      {"model.safetensors", "", ModelFileKind::kWeights},
      {"model-00001.index.json", "{}", ModelFileKind::kWeights},
      {"weights.json", R"({"metadata":{},"weight_map":{}})", ModelFileKind::kWeights},
      {"tree.json", R"({"format":"backplane-module-tree","version":1})", ModelFileKind::kTree},
      {"config.json", R"({"model_type":"llama"})", ModelFileKind::kConfig},
  };
  for (const auto& f : files) {
    write(folder.path() / f.name, f.text);
    EXPECT_EQ(backplane::locate_model((folder.path() / f.name).string(), "/none").kind, f.kind)
        << f.name;
  }
}

TEST(LocateModel, ALocalFolderWinsOverAHubIdOfTheSameSpelling) {
  TempFolder cache;
  cache_snapshot(cache.path(), "models--org--tiny", "main", "c0ffee", "{}");
  TempFolder work;
  write(work.path() / "org" / "tiny" / "config.json", "{}");
  const fs::path before = fs::current_path();
  fs::current_path(work.path());
  const backplane::ModelSource source = backplane::locate_model("org/tiny", cache.path());
  fs::current_path(before);
  EXPECT_FALSE(source.hub_id.has_value());
  EXPECT_EQ(source.path, fs::path("org/tiny/config.json"));
}

TEST(LocateModel, AnIdNotInTheCacheNamesTheFolderLookedIn) {
  TempFolder cache;
  const std::string message = error_of("org/missing", cache.path());
  EXPECT_NE(message.find((cache.path() / "models--org--missing").string()), std::string::npos)
      << message;
  EXPECT_NE(message.find("never downloads"), std::string::npos) << message;
}

TEST(LocateModel, ARevisionNotCachedNamesTheRefAndTheCachedSnapshots) {
  TempFolder cache;
  cache_snapshot(cache.path(), "models--org--tiny", "main", "c0ffee", "{}");
  const std::string message = error_of("org/tiny@v2", cache.path());
  EXPECT_NE(message.find("refs/v2"), std::string::npos) << message;
  EXPECT_NE(message.find("cached snapshots: c0ffee"), std::string::npos) << message;
  // A ref naming a snapshot that is gone.
  write(cache.path() / "models--org--tiny" / "refs" / "v3", "deadbeef");
  const std::string gone = error_of("org/tiny@v3", cache.path());
  EXPECT_NE(gone.find("names commit 'deadbeef'"), std::string::npos) << gone;
}

TEST(LocateModel, AFolderWithoutModelFilesSaysWhatItLacks) {
  TempFolder folder;
  const std::string message = error_of(folder.path().string(), "/none");
  EXPECT_NE(message.find("model.safetensors.index.json, model.safetensors or config.json"),
            std::string::npos)
      << message;
}

TEST(LocateModel, AWordThatIsNeitherPathNorIdSaysWhatIsAccepted) {
  const std::string message = error_of("./no/such/model", "/none");
  EXPECT_NE(message.find("not a Hub id: expected org/name[@revision]"), std::string::npos)
      << message;
  EXPECT_NE(error_of("", "/none").find("The model is empty"), std::string::npos);
}

}  // namespace
