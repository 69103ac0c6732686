// Repo ids, revisions, BACKPLANE_LOCAL_KERNELS, BACKPLANE_HUB_CACHE and the trust rules.
#include <backplane/error.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/hub/trust.hpp>

#include <gtest/gtest.h>

#include "support/scoped_environment.hpp"

namespace backplane::hub {
namespace {

TEST(RepoIdParse, AcceptsHubNamesAndRefusesTheRest) {
  for (const char* good : {"kernels-community/activation", "backplane/rmsnorm", "a/b",
                           "Org_1/repo.name", "x/flash-attn3"}) {
    SCOPED_TRACE(good);
    EXPECT_EQ(RepoId::parse(good, "test").str(), good);
  }
  for (const char* bad : {"", "org", "org/", "/repo", "org/repo/extra", "../repo", "org/..",
                          "org/.hidden", "org/repo.", "-org/repo", "org/re--po", "org/re..po",
                          "org/re po", "org:x/repo", "org/repo@main"}) {
    SCOPED_TRACE(bad);
    try {
      RepoId::parse(bad, "--repo");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--repo: '" + std::string(bad) + "'", 0), 0u)
          << e.what();
    }
  }
}

TEST(CheckRevision, KeepsEveryRevisionInsideItsFolder) {
  for (const char* good : {"main", "v1.2", "0123abcdef", "release_2"}) {
    EXPECT_NO_THROW(check_revision(good, "test")) << good;
  }
  for (const char* bad : {"", ".", "..", ".hidden", "refs/pr/1", "a b", "a\\b"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(check_revision(bad, "--revision"), InvalidArgument);
  }
}

TEST(LocalKernelsParse, ReadsTheVariableAndRefusesMalformedItemsNamingIt) {
  const LocalKernels local =
      LocalKernels::parse("org/a=/src/a:org/b=/src/b/../c", "BACKPLANE_LOCAL_KERNELS");
  ASSERT_EQ(local.repos.size(), 2u);
  EXPECT_EQ(local.repos.at("org/a"), "/src/a");
  EXPECT_EQ(local.repos.at("org/b"), "/src/c");
  EXPECT_TRUE(LocalKernels::parse("", "BACKPLANE_LOCAL_KERNELS").repos.empty());

  const std::pair<const char*, const char*> bad[] = {
      {"org/a", "has no '='"},
      {"org/a=relative/path", "is not absolute"},
      {"org/a=", "is not absolute"},
      {"bad=/x", "not a kernel repository id"},
      {"org/a=/x:org/a=/y", "org/a is given twice"},
  };
  for (const auto& [value, why] : bad) {
    SCOPED_TRACE(value);
    try {
      LocalKernels::parse(value, "BACKPLANE_LOCAL_KERNELS");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("BACKPLANE_LOCAL_KERNELS", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(LocalKernelsFromEnvironment, MalformedValueNamesTheVariable) {
  backplane::testing::ScopedEnvironment env;
  env.set("BACKPLANE_LOCAL_KERNELS", "org/a=/x");
  EXPECT_EQ(LocalKernels::from_environment().repos.at("org/a"), "/x");
  env.set("BACKPLANE_LOCAL_KERNELS", "org/a");
  EXPECT_THROW(LocalKernels::from_environment(), InvalidArgument);
  env.unset("BACKPLANE_LOCAL_KERNELS");
  EXPECT_TRUE(LocalKernels::from_environment().repos.empty());
}

TEST(DefaultStoreRoot, FollowsTheVariablesInOrder) {
  backplane::testing::ScopedEnvironment env;
  struct Case {
    const char* hub_cache;  // nullptr: unset
    const char* xdg;
    const char* home;
    const char* expected;  // nullptr: throws
  };
  const Case cases[] = {
      {"/store", "/xdg", "/home/u", "/store"},
      {"/store/../other", nullptr, "/home/u", "/other"},
      {nullptr, "/xdg", "/home/u", "/xdg/backplane/hub"},
      {"", "/xdg", "/home/u", "/xdg/backplane/hub"},
      {nullptr, "relative", "/home/u", "/home/u/.cache/backplane/hub"},
      {nullptr, nullptr, "/home/u", "/home/u/.cache/backplane/hub"},
      {"relative", nullptr, "/home/u", nullptr},
      {nullptr, nullptr, nullptr, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.hub_cache ? c.hub_cache : "-") + " " + (c.xdg ? c.xdg : "-") + " " +
                 (c.home ? c.home : "-"));
    for (const auto& [name, value] :
         {std::pair{"BACKPLANE_HUB_CACHE", c.hub_cache}, std::pair{"XDG_CACHE_HOME", c.xdg},
          std::pair{"HOME", c.home}}) {
      if (value) {
        env.set(name, value);
      } else {
        env.unset(name);
      }
    }
    if (c.expected) {
      EXPECT_EQ(default_store_root(), c.expected);
    } else {
      EXPECT_THROW(default_store_root(), InvalidArgument);
    }
  }
}

TEST(TrustPolicy, TrustsByNameOnlyWhatTheUserAddsAndNeverTheProjectOrg) {
  struct Case {
    const char* variable;  // BACKPLANE_TRUSTED_KERNELS; nullptr: unset
    const char* repo;
    bool trusted;
  };
  const Case cases[] = {
      {nullptr, "backplane/rmsnorm", false},  // by its hashes only: TrustPolicy::decide
      {nullptr, "kernels-community/activation", false},
      {"kernels-community", "kernels-community/activation", true},
      {"kernels-community", "kernels-communityx/activation", false},
      {"kernels-community/activation", "kernels-community/activation", true},
      {"kernels-community/activation", "kernels-community/rmsnorm", false},
      {" a , kernels-community ", "kernels-community/x", true},
      {"*", "anyone/anything", true},
      {"", "anyone/anything", false},
  };
  backplane::testing::ScopedEnvironment env;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.variable ? c.variable : "(unset)") + " " + c.repo);
    if (c.variable) {
      env.set("BACKPLANE_TRUSTED_KERNELS", c.variable);
    } else {
      env.unset("BACKPLANE_TRUSTED_KERNELS");
    }
    EXPECT_EQ(TrustPolicy::from_environment().trusts(RepoId::parse(c.repo, "test")), c.trusted);
  }
  for (const char* bad : {"org/", "a/b/c", "-x", "org/repo/", "backplane", "backplane/evil"}) {
    SCOPED_TRACE(bad);
    env.set("BACKPLANE_TRUSTED_KERNELS", bad);
    try {
      TrustPolicy::from_environment();
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("BACKPLANE_TRUSTED_KERNELS"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace backplane::hub
