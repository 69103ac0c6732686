// kernel-builder packages: metadata.json and digests equal to the `kernels` library's
// (tests/python/kernel_builder_oracle.py, when BACKPLANE_KERNEL_BUILDER_ORACLE is set), and the
// checks made before an extension library is opened.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/store.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "hub/hub_testing.hpp"

namespace backplane::hub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_file;
using testing::TempFolder;
using testing::write_file;

const char* oracle_dir() {
  return std::getenv("BACKPLANE_KERNEL_BUILDER_ORACLE");
}

json oracle() {
  std::ifstream in(fs::path(oracle_dir()) / "oracle.json");
  return json::parse(in);
}

TEST(KernelBuilderOracle, DigestsEqualTheKernelsLibrarys) {
  if (oracle_dir() == nullptr) GTEST_SKIP() << "BACKPLANE_KERNEL_BUILDER_ORACLE is not set";
  const json o = oracle();
  ASSERT_GE(o["digests"].size(), 4u);
  for (const json& d : o["digests"]) {
    const fs::path folder = fs::path(oracle_dir()) / "folders" / d["folder"].get<std::string>();
    SCOPED_TRACE(folder.string() + " " + d["algorithm"].get<std::string>());
    const KernelBuilderDigest ours =
        hash_kernel_builder_variant(folder, d["algorithm"].get<std::string>(), folder);
    const std::map<std::string, std::string> theirs = d["files"];
    EXPECT_EQ(ours.files, theirs);
  }
}

// Where this parser is stricter than the library's, on purpose (none today: every accepted
// text is accepted and every refused one refused).
TEST(KernelBuilderOracle, MetadataIsAcceptedAndRefusedAsTheKernelsLibraryDoes) {
  if (oracle_dir() == nullptr) GTEST_SKIP() << "BACKPLANE_KERNEL_BUILDER_ORACLE is not set";
  const json o = oracle();
  ASSERT_GE(o["metadata"].size(), 20u);
  for (const json& m : o["metadata"]) {
    SCOPED_TRACE(m["label"].get<std::string>());
    const std::string text = m["text"];
    bool accepted = true;
    std::string why;
    try {
      parse_kernel_builder_metadata(text, "build/v/metadata.json");
    } catch (const InvalidArgument& e) {
      accepted = false;
      why = e.what();
    }
    EXPECT_EQ(accepted, m["accepted"].get<bool>())
        << "ours: " << why << "\nkernels: " << m.value("error", "");
    if (!accepted) {
      EXPECT_EQ(why.rfind("build/v/metadata.json: ", 0), 0u) << why;
    }
  }
}

// kernels.lock in the library's format: the same texts accepted (with the same commits) and
// refused, except where this reader is stricter on purpose: a format that is an object without
// "kernels" is this project's and refused for that field.
TEST(KernelBuilderOracle, KernelsLocksAreReadAsTheKernelsLibraryReadsThem) {
  if (oracle_dir() == nullptr) GTEST_SKIP() << "BACKPLANE_KERNEL_BUILDER_ORACLE is not set";
  const json o = oracle();
  ASSERT_GE(o["locks"].size(), 10u);
  for (const json& l : o["locks"]) {
    SCOPED_TRACE(l["label"].get<std::string>());
    std::string why;
    std::vector<std::string> commits;
    try {
      const LockFile lock = LockFile::parse(l["text"].get<std::string>(), "kernels.lock");
      EXPECT_EQ(lock.format, LockFile::Format::kKernels);
      for (const auto& [repo, locked] : lock.repos) commits.push_back(locked.commit);
    } catch (const InvalidArgument& e) {
      why = e.what();
    }
    if (l["label"] == "an object") {
      EXPECT_NE(why.find("kernels.lock: "), std::string::npos) << why;
      continue;
    }
    EXPECT_EQ(why.empty(), l["accepted"].get<bool>())
        << "ours: " << why << "\nkernels: " << l.value("error", "");
    if (why.empty()) {
      std::vector<std::string> theirs = l["commits"];
      std::sort(commits.begin(), commits.end());
      EXPECT_EQ(commits, theirs);
    }
  }
}

TEST(KernelsLock, WritesTheLibrarysFormatAndRefusesARepoWithoutACommit) {
  LockFile lock;
  lock.repos["org/a"] = LockedRepo{std::string(40, 'c'), {}, std::string(40, 'c'), "v3"};
  lock.repos["org/b"] = LockedRepo{std::string(40, 'd'), {}, std::string(40, 'd'), "main"};
  const std::string text = lock.dump_kernels();
  EXPECT_NE(text.find("\"version\": 3"), std::string::npos) << text;
  EXPECT_NE(text.find("\"revision\": \"main\""), std::string::npos) << text;
  const LockFile back = LockFile::parse(text, "kernels.lock");
  EXPECT_EQ(back.repos.at("org/a").requested, "v3");
  EXPECT_EQ(back.repos.at("org/b").commit, std::string(40, 'd'));
  lock.repos["org/c"] = LockedRepo{"main", {}, "", "main"};
  try {
    lock.dump_kernels();
    ADD_FAILURE() << "wrote a lock without a commit";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("org/c@main has no commit"), std::string::npos)
        << e.what();
  }
}

const char* const kMetadata = R"({
  "name": "rms-norm", "id": "_rms_norm_cpu_0a1b2c3", "version": 2, "license": "Apache-2.0",
  "backend": {"type": "cuda", "archs": ["8.0", "9.0"]}, "python-depends": ["einops"],
  "kernel-depends": [{"repo-id": "org/a", "version": 1}, {"repo-id": "org/b", "revision": "main"}],
  "kernels-minver": "0.17.0", "digest": {"algorithm": "sha256", "files": {"a.py": "xyz="}}
})";

TEST(KernelBuilderMetadata, ReadsEveryField) {
  const KernelBuilderMetadata m = parse_kernel_builder_metadata(kMetadata, "m.json");
  EXPECT_EQ(m.name, "rms-norm");
  EXPECT_EQ(m.id, "_rms_norm_cpu_0a1b2c3");
  EXPECT_EQ(m.version, 2);
  EXPECT_EQ(m.backend, "cuda");
  EXPECT_EQ(m.archs, (std::vector<std::string>{"8.0", "9.0"}));
  EXPECT_EQ(m.python_depends, std::vector<std::string>{"einops"});
  ASSERT_EQ(m.kernel_depends.size(), 2u);
  EXPECT_EQ(m.kernel_depends[0].repo_id, "org/a");
  EXPECT_EQ(m.kernel_depends[0].version, "1");
  EXPECT_EQ(m.kernel_depends[1].version, "main");
  EXPECT_EQ(m.kernels_minver.value_or(""), "0.17.0");
  ASSERT_TRUE(m.digest);
  EXPECT_EQ(m.digest->files.at("a.py"), "xyz=");
  EXPECT_TRUE(is_kernel_builder_metadata(kMetadata));
  EXPECT_FALSE(is_kernel_builder_metadata(R"({"format": 1})"));
}

TEST(KernelBuilderMetadata, RefusalsNameTheFieldAndSayWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"id": "x"})",
       "name: is missing: this metadata.json was written by a kernel-builder "
       "from before 2026"},
      {R"({"name": "ok", "id": "9x", "version": 1, "license": "MIT", "backend": {"type": "cpu"},
           "python-depends": []})",
       "id: '9x' is not an op namespace"},
      {R"({"name": "ok", "id": "x", "version": 1, "license": "MIT", "backend": {"type": "gpu"},
           "python-depends": []})",
       "backend.type: 'gpu' is not one of cann, cpu"},
      {R"({"name": "ok", "id": "x", "version": 1.5, "license": "MIT", "backend": {"type": "cpu"},
           "python-depends": []})",
       "version: must be a non-negative integer"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    try {
      parse_kernel_builder_metadata(text, "build/v/metadata.json");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("build/v/metadata.json: ") + why),
                std::string::npos)
          << e.what();
    }
  }
}

// A variant folder with two files and a metadata.json whose digest covers them.
fs::path sealed_variant(const fs::path& root) {
  const fs::path v = root / "build" / "torch215-cxx11-cpu-x86_64-linux";
  write_file(v / "__init__.py", "from ._ops import ops\n");
  write_file(v / "_ext.abi3.so", "not really a library");
  const KernelBuilderDigest d = hash_kernel_builder_variant(v, "sha256", v);
  json files = json::object();
  for (const auto& [path, hash] : d.files) files[path] = hash;
  write_file(v / "metadata.json", json{{"name", "ext"},
                                       {"id", "_ext_cpu_1"},
                                       {"version", 1},
                                       {"license", "MIT"},
                                       {"backend", {{"type", "cpu"}}},
                                       {"python-depends", json::array()},
                                       {"digest", {{"algorithm", "sha256"}, {"files", files}}}}
                                      .dump());
  return v;
}

std::string violation_message(const fs::path& v) {
  try {
    verify_kernel_builder_variant(v, read_kernel_builder_metadata(v), v);
  } catch (const IntegrityError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelBuilderDigestCheck, NamesEveryChangedMissingOrExtraFile) {
  const TempFolder tmp;
  const fs::path v = sealed_variant(tmp.path());
  EXPECT_EQ(violation_message(v), "");
  write_file(v / "__init__.py", "import os; os.system('boom')\n");
  write_file(v / "extra.py", "");
  EXPECT_EQ(violation_message(v), v.string() +
                                      ": the files do not match metadata.json's sha256 digest:\n"
                                      "  - hash mismatch __init__.py\n"
                                      "  - unknown file extra.py");
  fs::remove(v / "_ext.abi3.so");
  EXPECT_NE(violation_message(v).find("  - missing file _ext.abi3.so"), std::string::npos);
}

TEST(KernelBuilderDigestCheck, RefusesALinkOutOfThePackage) {
  const TempFolder tmp;
  const fs::path v = sealed_variant(tmp.path());
  write_file(tmp.path() / "outside.py", "secret");
  fs::create_symlink(tmp.path() / "outside.py", v / "inside.py");
  try {
    hash_kernel_builder_variant(v, "sha256", v);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("inside.py: a link out of"), std::string::npos)
        << e.what();
  }
  // Allowed when the root is the repository's folder (a Hugging Face cache's blobs).
  EXPECT_EQ(hash_kernel_builder_variant(v, "sha256", tmp.path()).files.count("inside.py"), 1u);
  fs::remove(v / "inside.py");
  fs::create_symlink("../../../outside.py", v / "dotdot.py");
  EXPECT_THROW(hash_kernel_builder_variant(v, "sha256", v), InvalidArgument);
}

TEST(KernelBuilderDigestCheck, AMissingDigestIsRefused) {
  const TempFolder tmp;
  const fs::path v = sealed_variant(tmp.path());
  KernelBuilderMetadata m = read_kernel_builder_metadata(v);
  m.digest.reset();
  EXPECT_THROW(verify_kernel_builder_variant(v, m, v), IntegrityError);
}

TEST(KernelBuilderExtension, FindsTheOneLibraryOrSaysWhy) {
  const TempFolder tmp;
  const fs::path v = sealed_variant(tmp.path());
  EXPECT_EQ(kernel_builder_extension(v), v / "_ext.abi3.so");
  write_file(v / "_other.abi3.so", "");
  EXPECT_THROW(kernel_builder_extension(v), PackageError);
  fs::remove(v / "_other.abi3.so");
  fs::remove(v / "_ext.abi3.so");
  try {
    kernel_builder_extension(v);
    ADD_FAILURE() << "accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("a Python-only build"), std::string::npos) << e.what();
  }
}

std::string elf_refusal(const fs::path& file) {
  try {
    check_loadable_elf(file);
  } catch (const PackageError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelBuilderExtension, ChecksTheElfFileBeforeItIsOpened) {
  const TempFolder tmp;
  const fs::path good = HUB_TEST_PACKAGE_GOOD;  // a real shared library of this build
  EXPECT_EQ(elf_refusal(good), "");
  const std::string bytes = read_file(good);
  write_file(tmp.path() / "truncated.so", bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(elf_refusal(tmp.path() / "truncated.so").find("truncated: its headers reach byte"),
            std::string::npos);
  write_file(tmp.path() / "header_only.so", bytes.substr(0, 40));
  EXPECT_NE(elf_refusal(tmp.path() / "header_only.so").find("truncated"), std::string::npos);
  write_file(tmp.path() / "text.so", "#!/bin/sh\necho not a library\n");
  EXPECT_NE(elf_refusal(tmp.path() / "text.so").find("not an ELF file"), std::string::npos);
  std::string other_machine = bytes;
  other_machine[18] = 40;  // e_machine: EM_ARM
  other_machine[19] = 0;
  write_file(tmp.path() / "arm.so", other_machine);
  EXPECT_NE(elf_refusal(tmp.path() / "arm.so").find("for another machine"), std::string::npos);
  std::string executable = bytes;
  executable[16] = 2;  // ET_EXEC
  executable[17] = 0;
  write_file(tmp.path() / "exec.so", executable);
  EXPECT_NE(elf_refusal(tmp.path() / "exec.so").find("not a shared library"), std::string::npos);
}

// A Hugging Face cache beside the store: refs and snapshots listed (read-only), a snapshot
// found by its commit, never removed, hashed through its links into blobs/ and no further.
TEST(HfCache, RevisionsAreItsRefsAndSnapshotsReadOnly) {
  const TempFolder tmp;
  const fs::path repo = tmp.path() / "cache" / "kernels--org--kb";
  const std::string c1(40, '1'), c2(40, '2');
  for (const std::string& commit : {c1, c2}) {
    const fs::path v = sealed_variant(tmp.path() / ("src-" + commit));
    for (const auto& entry : fs::directory_iterator(v)) {
      const std::string bytes = read_file(entry.path());
      const fs::path blob = repo / "blobs" / (commit + entry.path().filename().string());
      write_file(blob, bytes);
      const fs::path link =
          repo / "snapshots" / commit / "build" / v.filename() / entry.path().filename();
      fs::create_directories(link.parent_path());
      fs::create_symlink(fs::relative(blob, link.parent_path()), link);
    }
  }
  write_file(repo / "refs" / "main", c1 + "\n");
  write_file(repo / "refs" / "v1", c1);
  const Store store(tmp.path() / "store", {}, {tmp.path() / "cache"});
  const RepoId id{"org", "kb"};
  std::vector<std::string> revisions;
  for (const InstalledPackage& p : store.find(id)) {
    EXPECT_TRUE(p.hf_cache);
    revisions.push_back(p.revision + "=" + p.commit.substr(0, 1));
  }
  EXPECT_EQ(revisions, (std::vector<std::string>{"main=1", "v1=1", c2 + "=2"}));
  EXPECT_EQ(store.locate(id, std::nullopt).revision, "main");
  EXPECT_EQ(store.locate(id, c2).commit, c2);
  EXPECT_EQ(store.remove(id, std::nullopt), 0u);
  EXPECT_TRUE(fs::exists(repo / "snapshots" / c1));
  // Hashed through the links, as the files they point at.
  const LockedRepo locked = store.lock_entry(id, std::string("v1"));
  EXPECT_EQ(locked.commit, c1);
  ASSERT_EQ(locked.variants.size(), 1u);
  EXPECT_EQ(locked.variants.begin()->second.files.count("__init__.py"), 1u);
  // A link out of the repository's folder is refused by name.
  const fs::path variant = repo / "snapshots" / c1 / "build" / "torch215-cxx11-cpu-x86_64-linux";
  write_file(tmp.path() / "outside", "x");
  fs::create_symlink(tmp.path() / "outside", variant / "outside.py");
  try {
    store.lock_entry(id, std::string("v1"));
    ADD_FAILURE() << "hashed a link out of the cache";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("outside.py: a link out of"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace backplane::hub
